package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/vfs"
)

func TestActorCommands(t *testing.T) {
	c := newCLI(t)
	out, errOut, code := c.run("# weekly\n", "actor", "upload", "alice", "reports/weekly.md")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "upload reports/weekly.md: 1 files")

	src := filepath.Join(t.TempDir(), "q1.md")
	require.NoError(t, os.WriteFile(src, []byte("q1 numbers"), 0o644))
	c.ok("actor", "upload", "alice", "reports/2026/q1.md", src)
	c.ok("actor", "upload", "alice", "temp/scratch.txt", src)
	_, _, code = c.run("bob's", "actor", "upload", "bob", "drafts/contract.md", "-")
	require.Equal(t, 0, code)

	var ls []vfs.Listed
	c.jsonOut(&ls, "actor", "ls", "alice", "", "--depth", "2")
	var names []string
	for _, l := range ls {
		names = append(names, l.Path.String())
	}
	assert.Equal(t, []string{"reports", "reports/2026", "reports/weekly.md", "temp", "temp/scratch.txt"}, names)
	assert.Contains(t, c.ok("actor", "ls", "alice", "reports"), "reports/weekly.md")

	assert.Equal(t, "# weekly\n", c.ok("actor", "download", "alice", "reports/weekly.md"))
	dst := filepath.Join(t.TempDir(), "out.md")
	c.ok("actor", "download", "alice", "reports/2026/q1.md", dst)
	b, err := os.ReadFile(dst)
	require.NoError(t, err)
	assert.Equal(t, "q1 numbers", string(b))

	var st actors.Stats
	c.jsonOut(&st, "actor", "stats", "alice")
	assert.Equal(t, int64(3), st.Files)
	assert.Contains(t, c.ok("actor", "stats", "bob"), "bob")

	assert.Contains(t, c.ok("actor", "rm-prefix", "alice", "temp/"), "1 files")
	c.ok("actor", "rm", "alice", "reports/2026")
	c.fails(3, "actor", "rm", "alice", "reports/2026")
	c.fails(3, "actor", "download", "alice", "nope.md", dst)
	b, err = os.ReadFile(dst)
	require.NoError(t, err)
	assert.Equal(t, "q1 numbers", string(b), "a failed download leaves FILE as it was")

	assert.Contains(t, c.ok("actor", "gc", "--grace", "0"), "pruned")
	assert.Equal(t, "# weekly\n", c.ok("actor", "download", "alice", "reports/weekly.md"))
	assert.Equal(t, "bob's", c.ok("actor", "download", "bob", "drafts/contract.md"))

	t.Run("ErrInvalidNames", func(t *testing.T) {
		// Names and paths typed on the command line are the command
		// line's mistakes: wsctl.invalid_argument, exit 2, saying why.
		errOut := c.fails(2, "actor", "ls", "../alice")
		assert.Contains(t, errOut, "wsctl.invalid_argument")
		assert.Contains(t, errOut, "path separator")
		_, errOut, code := c.run("x", "actor", "upload", "alice", "CON")
		assert.Equal(t, 2, code)
		assert.Contains(t, errOut, "wsctl.invalid_argument")
		assert.True(t, strings.Contains(errOut, "device name"), errOut)
	})
}

func TestActorBatchOps(t *testing.T) {
	c := newCLI(t)
	in := strings.Join([]string{
		`{"op":"actor.upload","id":1,"actor":"alice","path":"reports/weekly.md","content":"# weekly"}`,
		`{"op":"actor.upload","id":2,"actor":"alice","path":"bin/x.dat","contentBase64":"AAEC/w=="}`,
		`{"op":"actor.upload","id":3,"actor":"bob","path":"temp/a.md","content":"a"}`,
		`{"op":"actor.ls","id":4,"actor":"alice","depth":2}`,
		`{"op":"actor.download","id":5,"actor":"alice","path":"reports/weekly.md"}`,
		`{"op":"actor.download","id":6,"actor":"alice","path":"bin/x.dat"}`,
		`{"op":"actor.stats","id":7,"actor":"alice"}`,
		`{"op":"actor.rm-prefix","id":8,"actor":"bob","prefix":"temp/"}`,
		`{"op":"actor.rm","id":9,"actor":"alice","path":"bin"}`,
		`{"op":"actor.gc","id":10}`,
		`{"op":"actor.ls","id":11,"actor":"../x"}`,
		`{"op":"actor.upload","id":12,"actor":"alice","path":"aux.md","content":"x"}`,
	}, "\n") + "\n"
	out, errOut, code := c.run(in, "batch")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 12, "stdout %s stderr %s", out, errOut)
	assert.Equal(t, 0, code, "batch goes on past failed requests")
	for i := 0; i < 10; i++ {
		assert.Contains(t, lines[i], `"ok":true`, lines[i])
	}
	assert.Contains(t, lines[3], `"reports/weekly.md"`)
	assert.Contains(t, lines[4], `"content":"# weekly"`)
	assert.Contains(t, lines[5], `"contentBase64":"AAEC/w=="`)
	assert.Contains(t, lines[6], `"files":2`)
	assert.Contains(t, lines[7], `"files":1`)
	assert.Contains(t, lines[10], "workspace.invalid_actor")
	assert.Contains(t, lines[11], "workspace.invalid_path")

	// A field left out, or one that does not fit the others, is the
	// host's mistake (batch.invalid_request);
	// a bad value above is the model's.
	missing := []string{
		`{"op":"actor.upload","path":"x","content":"a"}`,
		`{"op":"actor.upload","actor":"alice","content":"a"}`,
		`{"op":"actor.download","actor":"alice"}`,
		`{"op":"actor.rm","actor":"alice"}`,
		`{"op":"actor.rm-prefix","actor":"alice"}`,
		`{"op":"actor.ls","actor":"alice","at":-1}`,
		`{"op":"actor.stats","actor":"alice","limit":1}`,
		`{"op":"chat.delete","chats":[{"kind":"character"}]}`,
	}
	out, errOut, code = c.run(strings.Join(missing, "\n")+"\n", "batch")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(missing), "stdout %s stderr %s", out, errOut)
	assert.Equal(t, 0, code)
	for i, l := range lines {
		assert.Contains(t, l, `"code":"batch.invalid_request"`, missing[i])
	}
	assert.Equal(t, "# weekly", c.ok("actor", "download", "alice", "reports/weekly.md"), "nothing changed")

	// Without an actor, actor.ls and actor.stats read across the spaces.
	out, errOut, code = c.run(`{"op":"actor.ls","depth":2}`+"\n"+`{"op":"actor.stats"}`+"\n", "batch")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, "stdout %s stderr %s", out, errOut)
	assert.Equal(t, 0, code)
	assert.Contains(t, lines[0], `{"path":"alice","name":"alice","kind":"dir"`)
	assert.Contains(t, lines[0], `"path":"alice/reports"`)
	assert.Contains(t, lines[1], `"stats":[{"actor":"alice"`)
}

// TestActorUploadRefusesCutBase64: contentBase64 that ends inside a group
// of four, or goes on past its padding, is refused and stores nothing;
// before, the decoder's short end read as the content's end and the
// upload stored what came before it.
func TestActorUploadRefusesCutBase64(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var lines []string
	for i, b64 := range []string{"aGVsbG8", "!!!", "aGVsbG8=!!", strings.Repeat("QUJD", 2000) + "QU"} {
		lines = append(lines, fmt.Sprintf(`{"op":"actor.upload","actor":"t","path":"f%d","contentBase64":%q}`, i, b64))
	}
	lines = append(lines, `{"op":"actor.ls","actor":"t"}`)
	out, errOut, code := c.run(strings.Join(lines, "\n")+"\n", "batch")
	require.Equal(t, 0, code, errOut)
	got := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, got, 5)
	for _, l := range got[:4] {
		assert.Contains(t, l, `"code":"batch.invalid_request"`, l)
		assert.Contains(t, l, `field \"contentBase64\" is not standard base64: at byte offset`, l)
	}
	assert.NotContains(t, got[4], `"path":"f`, "no file was stored: %s", got[4])
}

// TestActorNoChangeHasNoTime: a call that changes nothing records
// nothing (seq 0), and its answer carries no creation time.
func TestActorNoChangeHasNoTime(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out, errOut, code := c.run(`{"op":"actor.rm-prefix","actor":"alice","prefix":"zz/"}`+"\n", "batch")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"seq":0`)
	assert.NotContains(t, out, `"created"`)
}

// TestActorGuardedBatchOps: actor.upload and actor.rm with expectedHash
// change the file only when it still has that hash; otherwise they answer
// workspace.write_stale_file and change nothing. The zero hash is refused
// as a malformed one is, workspace.invalid_argument.
func TestActorGuardedBatchOps(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	one := cas.Sum([]byte("one")).String()
	zero := strings.Repeat("0", 64)
	in := strings.Join([]string{
		`{"op":"actor.upload","actor":"alice","path":"a.md","content":"one"}`,
		`{"op":"actor.upload","actor":"alice","path":"a.md","content":"two","expectedHash":"` + one + `"}`,
		`{"op":"actor.upload","actor":"alice","path":"a.md","content":"three","expectedHash":"` + one + `"}`,
		`{"op":"actor.rm","actor":"alice","path":"a.md","expectedHash":"` + one + `"}`,
		`{"op":"actor.rm","actor":"alice","path":"a.md","expectedHash":"` + zero + `"}`,
		`{"op":"actor.download","actor":"alice","path":"a.md"}`,
		`{"op":"actor.rm","actor":"alice","path":"a.md","expectedHash":"` + cas.Sum([]byte("two")).String() + `"}`,
		`{"op":"actor.ls","actor":"alice"}`,
	}, "\n") + "\n"
	out, errOut, code := c.run(in, "batch")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 8, out)
	assert.Contains(t, lines[1], `"ok":true`, lines[1])
	assert.Contains(t, lines[2], `"code":"workspace.write_stale_file"`, lines[2])
	assert.Contains(t, lines[3], `"code":"workspace.write_stale_file"`, lines[3])
	assert.Contains(t, lines[4], `"code":"workspace.invalid_argument"`, lines[4])
	assert.Contains(t, lines[5], `"content":"two"`, lines[5])
	assert.Contains(t, lines[6], `"ok":true`, lines[6])
	assert.NotContains(t, lines[7], `a.md`, lines[7])
}

// TestPolicyGetOfTheStore: policy.get without workspaceId answers the
// store-wide policy, the one policy.set without workspaceId and
// "wsctl policy --set" write.
func TestPolicyGetOfTheStore(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("init")
	c.ok("policy", "--set", "keepCompletedRuns=1")
	in := `{"op":"policy.get"}` + "\n" +
		`{"op":"policy.set","policy":{"keepCompletedRuns":2,"maxStoreBytes":999999999}}` + "\n" +
		`{"op":"policy.get"}` + "\n"
	out, errOut, code := c.run(in, "batch")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Contains(t, lines[0], `"policy":{"keepCompletedRuns":1}`)
	assert.Contains(t, lines[2], `"policy":{"keepCompletedRuns":2,"maxStoreBytes":999999999}`)
}

// TestHostQueriesRefuseWhatTheyCannotAnswer: a chat that does not exist,
// or a negative limit, is refused with a code, as the CLI refuses them,
// not answered with an empty or an unlimited list.
func TestHostQueriesRefuseWhatTheyCannotAnswer(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("init")
	in := strings.Join([]string{
		`{"op":"policy.get","workspaceId":"nope"}`,
		`{"op":"policy.get","workspaceId":"nope","effective":true}`,
		`{"op":"prune","workspaceId":"nope"}`,
		`{"op":"deletions","limit":-1}`,
		`{"op":"deletions","afterId":-5}`,
		`{"op":"runs.list","limit":-1}`,
	}, "\n") + "\n"
	out, errOut, code := c.run(in, "batch")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	for i, want := range []string{"store.not_found", "store.not_found", "store.not_found",
		"batch.invalid_request", "batch.invalid_request", "batch.invalid_request"} {
		assert.Contains(t, lines[i], `"code":"`+want+`"`, lines[i])
	}
}

// TestActorNameInErrorIsOneLine: a refused actor name with a newline or a
// byte that is not UTF-8 is quoted in the error, which stays one line.
func TestActorNameInErrorIsOneLine(t *testing.T) {
	c := newCLI(t)
	for name, want := range map[string]string{"al\nice": `"al\nice"`, "a\tb": `"a\tb"`, "a\xffb": `"a\xffb"`} {
		_, errOut, code := c.run("x", "actor", "upload", name, "a.md", "-")
		assert.Equal(t, 2, code, errOut)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
		assert.Contains(t, errOut, want)
	}
}
