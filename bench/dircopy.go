package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// dirCopy is the first-phase design: the workspace is a directory, and a
// checkpoint copies all of it into snapshots/NNNNNN/; a rollback deletes
// the workspace and copies the snapshot back.
type dirCopy struct {
	dir, snaps string
	ws         dirTree
	n          int
}

func (d *dirCopy) Name() string { return "dircopy" }

func (d *dirCopy) Setup(dir string) error {
	d.dir, d.snaps, d.ws = dir, filepath.Join(dir, "snapshots"), dirTree{filepath.Join(dir, "workspace")}
	if err := os.MkdirAll(d.ws.root, 0o755); err != nil {
		return err
	}
	return os.MkdirAll(d.snaps, 0o755)
}

func (d *dirCopy) Apply(op Op) error { return d.ws.apply(op) }

func (d *dirCopy) Checkpoint(string) (string, error) {
	d.n++
	id := fmt.Sprintf("%06d", d.n)
	return id, copyTree(d.ws.root, filepath.Join(d.snaps, id))
}

func (d *dirCopy) Rollback(id string) error {
	if err := os.RemoveAll(d.ws.root); err != nil {
		return err
	}
	return copyTree(filepath.Join(d.snaps, id), d.ws.root)
}

func (d *dirCopy) Verify(want map[string][32]byte) error {
	got, _, err := d.ws.sums()
	if err != nil {
		return err
	}
	return compareSums(want, got)
}

func (d *dirCopy) DiskBytes() (int64, error) {
	_, n, err := diskUsage(d.dir)
	return n, err
}

func (d *dirCopy) Close() error { return nil }
