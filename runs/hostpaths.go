package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// HostRoot is the top-level directory below which a run reaches its
// profile's allowed host directories: host/<name>/… is the file … of the
// host directory the profile names <name>. It is reserved in every
// profile, one that allows no host paths too: never a stored root.
const HostRoot = "host"

// ArtifactRoot is the run's artifact space (seed 004's ArtifactDir): the
// files commits assemble from, and the last fallback of PrimaryRoot.
const ArtifactRoot = "output"

// HostPath is one allowed host directory (seed 004 HostPaths). The store
// only checks boundaries: every access goes through an os.Root of Path,
// so no "..", absolute name or symlink reaches outside it; it never
// creates, chmods, collects, checkpoints, exports or gc's anything there.
// In JSON a HostPath is an object or, for a read-only one named after its
// last element, just the path string.
type HostPath struct {
	// Path is the host directory, absolute; it must exist when the run is
	// created (the store creates no host directory).
	Path string `json:"path"`
	// Name is the directory below host/ it appears as; default the last
	// element of Path. Names are single path segments, unique per profile.
	Name string `json:"name,omitempty"`
	// Writable lets the run write and remove files through it (seed 004
	// INV-IO-02: writes land only in the workspace or an allowed host
	// path). Default read-only.
	Writable bool `json:"writable,omitempty"`
}

// UnmarshalJSON accepts a HostPath object or a bare path string. An
// object holds only the fields path (a string, required), name (a
// string, not empty: left out, it defaults) and writable (true or false),
// spelled exactly so, as every object of
// the host protocol does; null is refused, as the object and as any of
// its fields.
func (h *HostPath) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	switch {
	case len(t) > 0 && t[0] == '"':
		*h = HostPath{}
		return json.Unmarshal(t, &h.Path)
	case len(t) == 0 || t[0] != '{':
		return fmt.Errorf("an allowed host path is an object or a path string, not %s", jsonKind(t))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(t, &fields); err != nil {
		return err
	}
	var out HostPath
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v := fields[k]
		var dst any
		want := "a string"
		switch k {
		case "path":
			dst = &out.Path
		case "name":
			dst = &out.Name
		case "writable":
			dst, want = &out.Writable, "a boolean"
		default:
			return fmt.Errorf("unknown field %q in an allowed host path: it holds path, name and writable (field names are case-sensitive)", k)
		}
		if got := jsonKind(bytes.TrimSpace(v)); got != want {
			return fmt.Errorf("%s of an allowed host path must be %s, not %s", k, want, got)
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return err
		}
		if k == "name" && out.Name == "" {
			return errors.New(`name of an allowed host path is empty: leave "name" out to name it after the last element of its path`)
		}
	}
	if _, ok := fields["path"]; !ok {
		return errors.New("an allowed host path needs its path")
	}
	*h = out
	return nil
}

// jsonKind names the kind of the JSON value t, for an error.
func jsonKind(t []byte) string {
	if len(t) == 0 {
		return "empty"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// PrimaryRoot is a run's active project (seed 004 PrimaryRoot), what a
// host shows as the project the agent works in.
type PrimaryRoot struct {
	// Source says how it was chosen: "explicit" (Profile.PrimaryRoot),
	// "allowPaths" (the first allowed host directory) or "artifact" (the
	// run's output/).
	Source string `json:"source"`
	// Path is its workspace path: host/<name>/… or output/….
	Path string `json:"path"`
	// HostPath is the host directory it names, for a host path.
	HostPath string `json:"hostPath,omitempty"`
}

// normalizeHost validates the host paths and the primary root: each
// allowed path absolute, an existing directory, not the system's
// temporary directory itself, with a valid name no other differs from
// but in case; the primary root inside AllowPaths or the artifact space
// (normalize keeps host/ from being a stored root).
// It fails with workspace.invalid_argument, or workspace.path_not_allowed
// for a path the Cell rules refuse.
func (p Profile) normalizeHost() (Profile, error) {
	const op = "profile"
	p.AllowPaths = slices.Clone(p.AllowPaths)
	names := map[string]string{} // by the name in lower case
	for i, h := range p.AllowPaths {
		if !filepath.IsAbs(h.Path) {
			return p, wserr.New(wserr.InvalidArgument, op, h.Path, "allowed host path %q is not absolute", h.Path)
		}
		h.Path = filepath.Clean(h.Path)
		fi, err := os.Stat(h.Path)
		switch {
		case h.Path == filepath.Clean(os.TempDir()) || (err == nil && sameDir(h.Path, os.TempDir())):
			return p, wserr.New(wserr.PathNotAllowed, op, h.Path, "the system's temporary directory is not a place for a run's writes")
		case err != nil:
			return p, wserr.New(wserr.InvalidArgument, op, h.Path, "allowed host path %q is not an existing directory (the store creates none): %v", h.Path, err)
		case !fi.IsDir():
			return p, wserr.New(wserr.InvalidArgument, op, h.Path, "allowed host path %q is not a directory", h.Path)
		}
		hint := ""
		if h.Name == "" {
			h.Name, hint = filepath.Base(h.Path), ` (the last element of its path): give it a "name"`
		}
		if _, err := vfs.Root().Join(h.Name); err != nil {
			return p, wserr.New(wserr.InvalidArgument, op, h.Path, "host path name %q must be one valid path segment%s: %s", h.Name, hint, wserr.MessageOf(err))
		}
		switch twin, ok := names[strings.ToLower(h.Name)]; {
		case ok && twin == h.Name:
			return p, wserr.New(wserr.InvalidArgument, op, h.Path, "two allowed host paths are named %q; name one with \"name\"", h.Name)
		case ok:
			return p, wserr.New(wserr.InvalidArgument, op, h.Path, "allowed host paths named %q and %q differ only in case, which a case-insensitive file system (macOS's, Windows's) takes for one directory; name one with \"name\"", twin, h.Name)
		}
		names[strings.ToLower(h.Name)] = h.Name
		p.AllowPaths[i] = h
	}
	if _, err := p.Primary(); err != nil {
		return p, err
	}
	return p, nil
}

// sameDir says whether the directories a and b are one: the same
// directory on disk (os.SameFile), whatever names lead to it.
func sameDir(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// holdsDir says whether the directory outer is the resolved path inner or
// one of its parents, compared as directories on disk (os.SameFile) rather
// than by name: a directory has names no symlink resolves into each other,
// another case of it on a case-insensitive file system (macOS's default)
// or a bind mount, and within, which compares names, misses them.
func holdsDir(outer, inner string) bool {
	fo, err := os.Stat(outer)
	if err != nil {
		return false
	}
	for p := inner; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, fo) {
			return true
		}
		if filepath.Dir(p) == p {
			return false
		}
	}
}

// within says whether the resolved path a is b or lies below it.
func within(a, b string) bool {
	rel, err := filepath.Rel(b, a)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// guardStore refuses, with workspace.path_not_allowed, an allowed host
// path that holds the store's directory or lies inside it (reachesStore).
func (s *Service) guardStore(p Profile) error {
	for _, h := range p.AllowPaths {
		if err := s.reachesStore("profile", h); err != nil {
			return err
		}
	}
	return nil
}

// isStoreFile reports whether fi, a file found in an allowed host path,
// is one of the store's database files under another name (a hard link):
// a host mount never opens those (vfs.HostOptions.Forbidden), since
// closing any descriptor of one drops the SQLite locks the process holds
// on it.
func (s *Service) isStoreFile(fi fs.FileInfo) bool {
	if n, ok := linkCount(fi); ok && n < 2 {
		// One name only, in a host path, which never holds the
		// store's directory (reachesStore): not the store's file.
		return false
	}
	for _, f := range index.FilesOf(s.db.Path()) {
		if sf, err := os.Stat(f); err == nil && os.SameFile(sf, fi) {
			return true
		}
	}
	return false
}

// reachesStore fails with workspace.path_not_allowed if the allowed host
// path h holds the store's directory or lies inside it, their symlinks
// resolved and compared as directories on disk (holdsDir), whatever name
// h gives the directory: a run's write there could replace the store's database, and
// even a read of one of its files, by any name, would drop the SQLite
// locks the process holds on it when closed. A mount of any other
// directory reaches the store only through a hard link to one of its
// files, which the mount refuses to open (isStoreFile); os.Root keeps
// every other access, symlinks included, inside it. Checked when a run is
// created and again whenever one reaches h, for runs that came in by
// import or sync. It refuses alike an allowed path that now leads to the
// system's temporary directory itself (a symlink put in its place since
// the run was created, or a run that came in by import or sync), as run
// creation does; and fails with workspace.file_not_found for an allowed
// path that is gone: the store creates no host directory.
func (s *Service) reachesStore(op string, h HostPath) error {
	dir, err := filepath.EvalSymlinks(h.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return wserr.New(wserr.FileNotFound, op, h.Path, "allowed host path %q no longer exists; the store creates no host directory", h.Path)
	}
	if err != nil {
		return wserr.New(wserr.InvalidArgument, op, h.Path, "allowed host path %q cannot be resolved: %v", h.Path, err)
	}
	if tmp, err := filepath.EvalSymlinks(os.TempDir()); err == nil && (dir == tmp || sameDir(dir, tmp)) {
		return wserr.New(wserr.PathNotAllowed, op, h.Path, "allowed host path %q leads to the system's temporary directory, which is not a place for a run's writes", h.Path)
	}
	store, err := s.storeDir()
	if err != nil {
		return nil // a store without a directory of its own (in memory)
	}
	if within(store, dir) || within(dir, store) || holdsDir(dir, store) || holdsDir(store, dir) {
		return wserr.New(wserr.PathNotAllowed, op, h.Path, "allowed host path %q holds the store's directory %s or lies inside it: a run may reach neither the store's files nor anything beside them there; allow a directory that does not hold the store", h.Path, store)
	}
	return nil
}

// Primary resolves the profile's primary root through seed 004's
// fallback chain: PrimaryRoot if set, else the first allowed host path,
// else the artifact space output/. An explicit one must lie within an
// allowed host path (an absolute host path, or host/<name>/…) or within
// output/; anything else fails with workspace.path_not_allowed.
func (p Profile) Primary() (PrimaryRoot, error) {
	switch {
	case p.PrimaryRoot != "":
	case len(p.AllowPaths) > 0:
		h := p.AllowPaths[0]
		return PrimaryRoot{Source: "allowPaths", Path: HostRoot + "/" + h.Name, HostPath: h.Path}, nil
	default:
		return PrimaryRoot{Source: "artifact", Path: ArtifactRoot}, nil
	}
	const op = "profile"
	if filepath.IsAbs(p.PrimaryRoot) {
		wp, _, err := p.hostWorkspacePath(op, p.PrimaryRoot)
		if err != nil {
			return PrimaryRoot{}, wserr.New(wserr.PathNotAllowed, op, p.PrimaryRoot, "primaryRoot must lie within allowPaths or output/: %s", wserr.MessageOf(err))
		}
		return PrimaryRoot{Source: "explicit", Path: wp.String(), HostPath: filepath.Clean(p.PrimaryRoot)}, nil
	}
	wp, err := vfs.ParsePath(p.PrimaryRoot)
	if err != nil {
		return PrimaryRoot{}, err
	}
	if wp.Top() == ArtifactRoot {
		return PrimaryRoot{Source: "explicit", Path: wp.String()}, nil
	}
	if wp.Top() == HostRoot && len(wp.Segments()) >= 2 {
		if h, ok := p.hostByName(wp.Segments()[1]); ok {
			rel := strings.Join(wp.Segments()[2:], "/")
			return PrimaryRoot{Source: "explicit", Path: wp.String(), HostPath: filepath.Join(h.Path, filepath.FromSlash(rel))}, nil
		}
	}
	return PrimaryRoot{}, wserr.New(wserr.PathNotAllowed, op, p.PrimaryRoot, "primaryRoot must lie within allowPaths (%s) or the artifact space %s/", p.allowList(), ArtifactRoot)
}

func (p Profile) hostByName(name string) (HostPath, bool) {
	for _, h := range p.AllowPaths {
		if h.Name == name {
			return h, true
		}
	}
	return HostPath{}, false
}

func (p Profile) allowList() string {
	if len(p.AllowPaths) == 0 {
		return "none"
	}
	var s []string
	for _, h := range p.AllowPaths {
		s = append(s, h.Path)
	}
	return strings.Join(s, ", ")
}

// allowNames lists the workspace paths of the allowed host paths
// (host/<name>), for messages the model may read: where they lie on the
// host is the host's to know.
func (p Profile) allowNames() string {
	s := make([]string, len(p.AllowPaths))
	for i, h := range p.AllowPaths {
		s[i] = HostRoot + "/" + h.Name
	}
	return strings.Join(s, ", ")
}

// hostWorkspacePath maps the absolute host path abs to its workspace path
// host/<name>/… under the allowed host path that holds it (lexically,
// after cleaning; symlinks are os.Root's to refuse when the path is
// used). It fails with workspace.path_not_allowed for a path in the
// system's temporary directory or outside every allowed path, and with
// workspace.invalid_path for a name no workspace path can hold.
func (p Profile) hostWorkspacePath(op, abs string) (vfs.Path, HostPath, error) {
	if !filepath.IsAbs(abs) {
		return vfs.Path{}, HostPath{}, wserr.New(wserr.InvalidPath, op, abs, "a host path must be absolute")
	}
	abs = filepath.Clean(abs)
	for _, h := range p.AllowPaths {
		rel, err := filepath.Rel(h.Path, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		wp := vfs.MustPath(HostRoot + "/" + h.Name)
		if rel != "." {
			r, err := vfs.ParsePath(filepath.ToSlash(rel))
			if err != nil {
				return vfs.Path{}, HostPath{}, err
			}
			wp = joinPath(wp, r)
		}
		return wp, h, nil
	}
	if tmp := filepath.Clean(os.TempDir()); abs == tmp || strings.HasPrefix(abs, tmp+string(filepath.Separator)) {
		return vfs.Path{}, HostPath{}, wserr.New(wserr.PathNotAllowed, op, abs, "%s is the system's temporary directory: writes land only in the workspace or an allowed host path (%s)", tmp, p.allowList())
	}
	return vfs.Path{}, HostPath{}, wserr.New(wserr.PathNotAllowed, op, abs, "outside every allowed host path (%s)", p.allowList())
}
