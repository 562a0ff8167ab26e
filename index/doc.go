// Package index opens the store's SQLite database and runs its transactions.
//
// It owns the meta table (the store's format version) and nothing else:
// each other table belongs to the package whose SQL alone names it (cas,
// vfs, journal, checkpoint, runs, actors), and a Tx carries their SQL
// without knowing it.
//
// A DB holds one write connection (every write transaction is BEGIN
// IMMEDIATE, so writers queue on SQLite's lock instead of failing halfway)
// and a separate pool of read connections that see the last committed state
// through WAL. Open applies pending migrations through goose's Provider and
// refuses a store written by a newer format. Several processes may open
// the same store at once: each migration is applied and recorded exactly
// once, and the others wait for it. Update and View run a function
// in a transaction and roll back if it returns an error or panics; nothing a
// failed function wrote is ever committed. Both kinds of transaction reuse
// statements prepared once (see stmt.go): compiling SQL costs more than
// running the store's small statements.
package index
