package wsstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// ExportFile writes an archive of what scope selects (Archive.Export) to
// the file at path on the host's file system, as WriteFile writes a file:
// a failed export leaves no partial file and never a truncated one in
// path's place. It fails as Export does, and as WriteFile does
// (workspace.invalid_argument for a path that cannot take the file or is
// one of the store's own files, store.disk_full when the disk fills).
func (s *Store) ExportFile(ctx context.Context, path string, scope archive.Scope, opt archive.Options) (archive.Summary, error) {
	var sum archive.Summary
	err := s.WriteFile("export", path, func(w io.Writer) error {
		var err error
		sum, err = s.Archive.Export(ctx, w, scope, opt)
		return err
	})
	if err != nil {
		return archive.Summary{}, err
	}
	return sum, nil
}

// WriteFile writes what fill writes to the file at path on the host's
// file system; op names the operation in its errors. The content is
// written beside path and renamed onto it once complete and synced, so a
// failure (of fill, or of the disk) leaves no partial file and never a
// truncated one in path's place (the file a killed process left beside
// path is removed by a later WriteFile to path, once an hour old); a file
// it replaces keeps its permission
// bits, a new one is readable by its owner alone. A symbolic link is
// followed: the file it leads to is replaced, and the link stays. A path
// that is not a regular file (a named pipe, a device, /dev/stdout) is
// written into, as standard output is. It fails with
// workspace.invalid_argument if path's directory cannot take the file or
// the file cannot be put in path's place (a directory made there
// meanwhile, a file this user may not replace),
// path is a directory or a link to nothing, or it is one of the store's
// own files (OwnsFile), which it would destroy; with store.disk_full or
// store.read_only when the disk fills or cannot be written; and with
// fill's error.
func (s *Store) WriteFile(op, path string, fill func(w io.Writer) error) error {
	if path == "" {
		return wserr.New(wserr.InvalidArgument, op, "", "empty path")
	}
	if fill == nil {
		return wserr.New(wserr.InvalidArgument, op, path, "nothing to write it with")
	}
	if s.OwnsFile(path) {
		return wserr.New(wserr.InvalidArgument, op, path, "that is the store's own database file; name another file")
	}
	var mode fs.FileMode
	keepMode := false
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		// Refused before anything is written beside it.
		return wserr.New(wserr.InvalidArgument, op, path, "that is a directory; name a file")
	case err == nil && !fi.Mode().IsRegular():
		// A pipe, a device, a terminal: written into, as standard
		// output is; renaming over it would destroy it.
		return writeInto(op, path, fill)
	case err == nil:
		// A link is followed: the file it leads to is replaced, and the
		// link stays.
		if path, err = filepath.EvalSymlinks(path); err != nil {
			return wserr.Wrap(wserr.InvalidArgument, op, path, err)
		}
		mode, keepMode = fi.Mode().Perm(), true
	case errors.Is(err, fs.ErrNotExist):
		if lfi, lerr := os.Lstat(path); lerr == nil && lfi.Mode()&fs.ModeSymlink != 0 {
			return wserr.New(wserr.InvalidArgument, op, path, "that is a symbolic link to nothing; name a file")
		}
	default:
		// A loop of links, a parent that is a file, no permission: what
		// path names cannot be told, so nothing is put in its place.
		return wserr.Wrap(wserr.InvalidArgument, op, path, err)
	}
	clearOldWrites(path)
	tmp, err := os.CreateTemp(filepath.Dir(path), writePrefix(path)+"*")
	if err != nil {
		if ferr := wserr.FSFault(op, path, err); ferr != err {
			return ferr
		}
		if errors.Is(err, fs.ErrNotExist) {
			return wserr.New(wserr.InvalidArgument, op, path, "its directory %s does not exist", filepath.Dir(path))
		}
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err // the name is of the file beside path, never seen
		}
		return wserr.New(wserr.InvalidArgument, op, path, "cannot write a file in %s: %v", filepath.Dir(path), err)
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if keepMode {
		if err := tmp.Chmod(mode); err != nil {
			return wserr.FromFS(op, path, err)
		}
	}
	if err := fill(wserr.FSWriter(op, path, tmp)); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return wserr.FromFS(op, path, err)
	}
	if err := tmp.Close(); err != nil {
		return wserr.FromFS(op, path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return renameFault(op, path, err)
	}
	tmp = nil
	return nil
}

// renameFault codes a failure to put the file written beside path in its
// place: a directory there now, or a file this user may not replace (in a
// sticky directory, one another user owns), is path's own state, as a
// directory that cannot take the file is (workspace.invalid_argument); a
// full disk or a read-only file system keeps its code.
func renameFault(op, path string, err error) error {
	if ferr := wserr.FSFault(op, path, err); ferr != err {
		return ferr
	}
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENOTEMPTY) {
		if le, ok := errors.AsType[*os.LinkError](err); ok {
			err = le.Err // the name beside path is never seen
		}
		return wserr.New(wserr.InvalidArgument, op, path, "cannot put the file in its place: %v", err)
	}
	return wserr.FromFS(op, path, err)
}

// staleWrite is how long a WriteFile's file beside path may go unwritten
// before another WriteFile to path takes it for one a killed process left.
const staleWrite = time.Hour

// writePrefix is the name, but for the digits os.CreateTemp adds, of
// the file WriteFile writes beside path: ".NAME.wsstore-". The mark
// keeps clearOldWrites to files this package made, never one that merely
// has path's name, a dot and digits (a dated copy, another program's).
func writePrefix(path string) string {
	return "." + filepath.Base(path) + ".wsstore-"
}

// clearOldWrites removes the files WriteFile began beside path
// (writePrefix and digits) that nothing has written to for staleWrite: a
// process killed while writing leaves its file there, and one still
// writing keeps touching its own.
func clearOldWrites(path string) {
	dir, prefix := filepath.Dir(path), writePrefix(path)
	es, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range es {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		// The wall clock, not the store's: it is compared with the file
		// system's times.
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleWrite {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// writeInto writes what fill writes into path, a pipe or a device that
// is not a regular file, as into standard output.
func writeInto(op, path string, fill func(w io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		if ferr := wserr.FSFault(op, path, err); ferr != err {
			return ferr
		}
		return wserr.Wrap(wserr.InvalidArgument, op, path, err)
	}
	err = fill(wserr.FSWriter(op, path, f))
	if cerr := f.Close(); err == nil && cerr != nil {
		err = wserr.FromFS(op, path, cerr)
	}
	return err
}

// ImportFile imports the archive in the file at path on the host's file
// system (Archive.Import). It fails as Import does, as OpenArchiveFile
// does when the file cannot be opened, and with workspace.invalid_argument
// for one of the store's own database files (OwnsFile).
func (s *Store) ImportFile(ctx context.Context, path string, opt archive.Options) (archive.Summary, error) {
	if s.OwnsFile(path) {
		// Closing it again would drop this process's locks on it.
		return archive.Summary{}, wserr.New(wserr.InvalidArgument, "import", path, "that is the store's own database file, not an archive")
	}
	f, err := OpenArchiveFile(path)
	if err != nil {
		return archive.Summary{}, err
	}
	defer f.Close()
	return s.Archive.Import(ctx, f, opt)
}

// OpenArchiveFile opens the file at path to import it. It fails with
// workspace.invalid_argument for an empty path, a directory, a file this
// user may not read or a path no file can be at (a loop of symbolic
// links, a name too long), as ExportFile for a file it cannot write, and
// with store.not_found if there is no file at path.
func OpenArchiveFile(path string) (*os.File, error) {
	const op = "import"
	if path == "" {
		return nil, wserr.New(wserr.InvalidArgument, op, "", "empty path")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, archiveOpenError(op, path, err)
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, wserr.New(wserr.InvalidArgument, op, path, "is a directory, not an archive")
	}
	return f, nil
}

// archiveOpenError codes err, the failure to open the archive at path.
func archiveOpenError(op, path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return wserr.Wrap(wserr.NotFound, op, path, err)
	case errors.Is(err, fs.ErrPermission):
		return wserr.Wrap(wserr.InvalidArgument, op, path, fmt.Errorf("this user may not read it: %w", err))
	case errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EINVAL):
		return wserr.Wrap(wserr.InvalidArgument, op, path, fmt.Errorf("no archive can be at this path: %w", err))
	}
	return wserr.FromFS(op, path, err)
}

// OwnsFile reports whether path names one of the files the store keeps
// its database in (the database, its write-ahead log and shared-memory
// index, a rollback journal), by any name: through symbolic links, ".."
// or another hard link. A command that writes a file the user names
// refuses these, since writing one over would destroy the store.
func (s *Store) OwnsFile(path string) bool { return ownsFile(s.DB.Path(), path) }

// IsStoreFile reports whether path names one of the database files of the
// store in dir, as Store.OwnsFile does, without opening the store: for a
// command that must refuse such a file before it opens anything (opening
// and closing one of them in a process that has the store open drops
// SQLite's locks on it).
func IsStoreFile(dir, path string) bool { return ownsFile(filepath.Join(dir, DBName), path) }

func ownsFile(db, path string) bool {
	target := resolvePath(path)
	fi, statErr := os.Stat(path)
	for _, f := range index.FilesOf(db) {
		if resolvePath(f) == target {
			return true
		}
		if statErr == nil {
			if ofi, err := os.Stat(f); err == nil && os.SameFile(fi, ofi) {
				return true
			}
		}
	}
	return false
}

// resolvePath returns path absolute, with the symbolic links of its
// directory resolved (the file itself may not exist yet).
func resolvePath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	dir, base := filepath.Split(abs)
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	if full, err := filepath.EvalSymlinks(filepath.Join(dir, base)); err == nil {
		return full
	}
	return filepath.Join(dir, base)
}
