package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildsFor32Bit: the store builds, without cgo, where int is 32 bits
// (linux/arm, as 32-bit phones run it), which the tests on the reference
// machine never compile: a constant past 32 bits in an int expression
// broke that build once.
func TestBuildsFor32Bit(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles every package")
	}
	// The build's sources are this test's inputs: stat'ing them makes go
	// test's cache run it again whenever one changes.
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
			_, err = os.Stat(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", os.DevNull, "./...")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=arm go build ./...: %v\n%s", err, out)
	}
}
