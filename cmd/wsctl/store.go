package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/mkdirs"
	"github.com/wsstore/wsstore/wserr"
)

// openMode says how a command opens the store.
type openMode int

const (
	// readOnly opens an existing store without a write connection:
	// queries.
	readOnly openMode = iota
	// readWrite opens an existing store for writing: maintenance.
	readWrite
	// create opens the store, creating it if needed: demo and batch.
	create
)

// openStore opens the store in g.storeDir. Except in create mode a missing
// store fails with store.not_found, so a query never leaves an empty store
// behind.
func openStore(ctx context.Context, g globals, mode openMode) (*wsstore.Store, error) {
	opts := storeOptions(g, mode)
	// A bad global flag is a usage error whatever the store's state:
	// checked before the directory is looked at.
	if err := opts.Validate(g.storeDir); err != nil {
		return nil, err
	}
	check := storeExists
	if mode == create {
		check = checkStoreDir
	}
	if err := check(g.storeDir); err != nil {
		return nil, err
	}
	if mode != readOnly {
		// A restore killed part way leaves its directory here, up to a
		// copy of the whole database; once a store is in place no restore
		// runs here again to clear it.
		clearOldRestores(g.storeDir)
	}
	st, err := wsstore.Open(ctx, g.storeDir, opts)
	if mode == readOnly && wserr.Is(err, wserr.OlderFormat) {
		// A store an older wsctl wrote: upgrade it as any writing command
		// would, then open it read-only as asked.
		up := opts
		up.Index.ReadOnly = false
		if st, err = wsstore.Open(ctx, g.storeDir, up); err != nil {
			return nil, err
		}
		if err := st.Close(); err != nil {
			return nil, err
		}
		st, err = wsstore.Open(ctx, g.storeDir, opts)
	}
	return st, err
}

// storeOptions are the store options the global flags give, for mode.
func storeOptions(g globals, mode openMode) wsstore.Options {
	opts := wsstore.Options{Index: index.Options{ReadOnly: mode == readOnly, Synchronous: g.sync, BusyTimeout: g.busyTimeout}, Profile: g.profile, Blobs: g.blobs}
	opts.Runs.MaxStoreBytes = g.maxStore
	if g.now != nil {
		opts.Now = g.now
	}
	return opts
}

// openCreating opens the store for a command that creates it where there
// is none (import, token create, actor upload). It returns, with the
// store, what to call when the command then fails: it closes the store
// and removes it if this command created it, so a failed command leaves
// no new, empty store behind. An open that fails removes what it made.
func openCreating(ctx context.Context, g globals) (st *wsstore.Store, failed func(), err error) {
	undo := newStoreUndo(g.storeDir)
	st, err = openStore(ctx, g, create)
	if err != nil {
		if undo != nil {
			undo()
		}
		return nil, nil, err
	}
	return st, func() {
		if undo != nil {
			st.Close()
			undo()
		}
	}, nil
}

// newStoreUndo returns what removes the store a command is about to
// create in dir, or nil when dir holds a database file already: the
// directory, and the parents it makes while they are empty, if the
// command makes it, else the database's files.
func newStoreUndo(dir string) func() {
	if _, err := os.Lstat(filepath.Join(dir, wsstore.DBName)); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if made := mkdirs.Missing(filepath.Clean(dir)); len(made) > 0 {
		return func() {
			_ = os.RemoveAll(dir)
			mkdirs.RemoveEmpty(made)
		}
	}
	return func() {
		for _, f := range index.FilesOf(filepath.Join(dir, wsstore.DBName)) {
			_ = os.Remove(f)
		}
	}
}

// openServing opens the store for a session that serves requests (batch,
// serve), creating it if needed. A store that exists but cannot be
// written (a read-only file system) is opened read-only instead, so reads
// are still served and each change is refused with store.read_only.
func openServing(ctx context.Context, g globals) (*wsstore.Store, error) {
	st, err := openStore(ctx, g, create)
	if wserr.Is(err, wserr.ReadOnly) && storeExists(g.storeDir) == nil {
		return openStore(ctx, g, readOnly)
	}
	return st, err
}

// checkStoreDir fails with store.invalid_options (exit status 2, a bad
// --store) when dir is a file, lies below one or leads through a loop of
// symbolic links: no command can open or create a store there, whether it
// only reads or creates.
func checkStoreDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return wserr.New(wserr.InvalidOptions, "open store", dir, "is a file: --store names the store's directory")
	case errors.Is(err, syscall.ENOTDIR):
		return wserr.New(wserr.InvalidOptions, "open store", dir, "a parent of the store directory is a file")
	case err != nil && noPathThere(err):
		return wserr.Wrap(wserr.InvalidOptions, "open store", dir, fmt.Errorf("no store can be at this path: %w", err))
	}
	return nil
}

// noPathThere reports whether err says no file can be at the path it
// names: a loop of symbolic links, or a name too long.
func noPathThere(err error) bool {
	return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENAMETOOLONG)
}

// storeExists fails with store.not_found unless dir holds a store, and
// as checkStoreDir does if dir cannot hold one.
func storeExists(dir string) error {
	if err := checkStoreDir(dir); err != nil {
		return err
	}
	_, err := os.Stat(filepath.Join(dir, wsstore.DBName))
	if errors.Is(err, fs.ErrNotExist) {
		return wserr.New(wserr.NotFound, "open store", dir, "no store here: run \"wsctl init\" to create one (\"wsctl init DIR\" elsewhere), or pass --store DIR")
	}
	if err != nil && noPathThere(err) {
		return wserr.Wrap(wserr.InvalidOptions, "open store", dir, fmt.Errorf("no store database can be in this directory: %w", err))
	}
	if errors.Is(err, fs.ErrPermission) {
		return wserr.New(wserr.InvalidOptions, "open store", dir, "this user may not read the store's directory, or a directory on its path")
	}
	if err != nil {
		return wserr.Wrap(wserr.Internal, "open store", dir, err)
	}
	return nil
}
