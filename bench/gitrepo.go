package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// gitRepo is a shadow git repository over the workspace directory: a
// checkpoint is `git add -A` and `git commit`, a rollback is
// `git read-tree -u --reset <commit>` and `git clean -fdq`, which restores
// the tree without moving the branch, so later commits stay reachable as
// wsstore's later checkpoints do. The repository lives beside the
// workspace (GIT_DIR), so the workspace holds only workspace files.
// Automatic gc is off (gc.auto=0) so that "bytes before gc" means what it
// says; GC runs a plain `git gc -q` at the end.
type gitRepo struct {
	dir, gitDir string
	ws          dirTree
	env         []string
	gitDirBytes []int64 // .git allocated bytes before and after gc
}

// gitAvailable reports whether a git binary is on PATH, and its version.
func gitAvailable() (string, bool) {
	out, err := exec.Command("git", "--version").Output()
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

func (g *gitRepo) Name() string { return "git" }

func (g *gitRepo) Setup(dir string) error {
	g.dir, g.gitDir, g.ws = dir, filepath.Join(dir, "repo.git"), dirTree{filepath.Join(dir, "workspace")}
	if err := os.MkdirAll(g.ws.root, 0o755); err != nil {
		return err
	}
	const when = "2025-01-01T00:00:00+00:00"
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "LC_ALL=") {
			g.env = append(g.env, kv)
		}
	}
	g.env = append(g.env, "GIT_DIR="+g.gitDir, "GIT_WORK_TREE="+g.ws.root, "HOME="+dir, "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.invalid", "GIT_AUTHOR_DATE="+when,
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.invalid", "GIT_COMMITTER_DATE="+when)
	if _, err := g.git("init", "-q", "-b", "main"); err != nil {
		return err
	}
	for _, kv := range [][2]string{{"gc.auto", "0"}, {"core.autocrlf", "false"}, {"commit.gpgsign", "false"}} {
		if _, err := g.git("config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

func (g *gitRepo) git(args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = g.ws.root, g.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

func (g *gitRepo) Apply(op Op) error { return g.ws.apply(op) }

func (g *gitRepo) Checkpoint(label string) (string, error) {
	if _, err := g.git("add", "-A"); err != nil {
		return "", err
	}
	if _, err := g.git("commit", "-q", "--allow-empty", "--no-verify", "-m", label); err != nil {
		return "", err
	}
	// The branch's loose ref holds the new commit (auto gc, which would
	// pack refs, is off); reading it saves a rev-parse process.
	if b, err := os.ReadFile(filepath.Join(g.gitDir, "refs", "heads", "main")); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	out, err := g.git("rev-parse", "HEAD")
	return strings.TrimSpace(string(out)), err
}

func (g *gitRepo) Rollback(id string) error {
	if _, err := g.git("read-tree", "-u", "--reset", id); err != nil {
		return err
	}
	_, err := g.git("clean", "-fdq")
	return err
}

func (g *gitRepo) Verify(want map[string][32]byte) error {
	got, _, err := g.ws.sums()
	if err != nil {
		return err
	}
	return compareSums(want, got)
}

// DiskBytes counts the workspace and the repository.
func (g *gitRepo) DiskBytes() (int64, error) {
	_, n, err := diskUsage(g.dir)
	if err != nil {
		return 0, err
	}
	_, repo, err := diskUsage(g.gitDir)
	g.gitDirBytes = append(g.gitDirBytes, repo)
	return n, err
}

// GC runs a plain `git gc -q` (not --aggressive).
func (g *gitRepo) GC() error {
	_, err := g.git("gc", "-q")
	return err
}

func (g *gitRepo) Close() error { return nil }

func (g *gitRepo) Notes() []string {
	if len(g.gitDirBytes) < 2 {
		return nil
	}
	return []string{fmt.Sprintf("repository alone, without the checked-out workspace: %s before gc, %s after `git gc -q`",
		fmtBytes(g.gitDirBytes[0]), fmtBytes(g.gitDirBytes[1]))}
}
