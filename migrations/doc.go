// Package migrations embeds the store's schema as goose SQL migrations.
//
// Files are numbered and applied in order by index.Open through goose's
// Provider. A landed migration is never edited: a schema change is a new file.
// FormatVersion is the store format these migrations produce; a store whose
// recorded format or migration version is newer than this build knows is
// refused rather than opened.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS

// FormatVersion is the store format written by this build. It is recorded in
// the meta table and bumped by any migration that changes what older builds
// could misread.
const FormatVersion = 3
