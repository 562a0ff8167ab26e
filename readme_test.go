package wsstore_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeTestCommand is the README's test command, which .ci/run calls too.
const readmeTestCommand = `go test ./... && go test -race . ./index ./cas ./journal ./runs ./vfs -run 'Concurrent|Parallel|Gapless'`

// TestREADMEStartsWithTheTwoCommands: the README's first code block is
// the demo and the test command, and CI runs exactly that test command.
func TestREADMEStartsWithTheTwoCommands(t *testing.T) {
	readme := readmeFile(t, "README.md")
	m := regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindStringSubmatch(readme)
	require.NotNil(t, m)
	assert.Equal(t, "go run ./cmd/wsctl demo\n"+readmeTestCommand+"\n", m[1])

	var last string
	for _, l := range strings.Split(readmeFile(t, filepath.Join(".ci", "run")), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			last = l
		}
	}
	assert.Equal(t, readmeTestCommand, last, ".ci/run ends with the README's test command")
}

// TestREADMEQuotesTheExample: the README's embedding code is Example in
// example_test.go, imports and all, so what it shows compiles and runs.
func TestREADMEQuotesTheExample(t *testing.T) {
	readme := readmeFile(t, "README.md")
	src := readmeFile(t, "example_test.go")
	imp := src[strings.Index(src, "import ("):]
	imp = imp[:strings.Index(imp, "\n)\n")+3]
	fn := src[strings.Index(src, "func Example() {"):]
	fn = fn[:strings.Index(fn, "\n}\n")+3]
	assert.Contains(t, readme, "```go\n"+imp+"\n"+fn+"```\n", "the README quotes example_test.go's imports and Example verbatim")
}

// TestREADMELinksResolve: every relative link of the README and docs/
// names a file that exists.
func TestREADMELinksResolve(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	for _, doc := range append([]string{"README.md", "CHANGELOG.md"}, docs...) {
		for _, m := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(readmeFile(t, doc), -1) {
			target := filepath.Join(filepath.Dir(doc), m[1])
			_, err := os.Stat(target)
			assert.NoError(t, err, "%s links to %s", doc, m[1])
		}
	}
}

// TestDocsNameTestsThatExist: every test, benchmark, fuzz target and
// example that README or a page of docs/ names as proof (`TestServeRSS`,
// `TestFsckBesideGC*` for a family) is a function of the module's tests,
// so a renamed test cannot leave a claim without the test behind it.
func TestDocsNameTestsThatExist(t *testing.T) {
	funcs := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			funcs[m[1]] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, funcs)

	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	named := regexp.MustCompile("`(?:[a-z/]+ )?((?:Test|Benchmark|Fuzz|Example)[A-Z][A-Za-z0-9_]*)(\\*?)")
	for _, doc := range append([]string{"README.md"}, docs...) {
		for _, m := range named.FindAllStringSubmatch(readmeFile(t, doc), -1) {
			found := funcs[m[1]]
			if m[2] == "*" {
				for f := range funcs {
					found = found || strings.HasPrefix(f, m[1])
				}
			}
			assert.True(t, found, "%s names %s%s, which no test declares", doc, m[1], m[2])
		}
	}
}

// TestDocLinksNameSections: every link to a section (`README.md#retention`,
// `#scripting`) of README, CHANGELOG or docs/ names a heading the linked
// file has, as GitHub spells its anchor, so a renamed section cannot leave
// a link that lands at the top of the page.
func TestDocLinksNameSections(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	files := append([]string{"README.md", "CHANGELOG.md"}, docs...)
	anchors := map[string]map[string]bool{}
	fence := regexp.MustCompile("(?s)```.*?```")
	heading := regexp.MustCompile(`(?m)^#+ (.*)$`)
	for _, f := range files {
		anchors[filepath.Clean(f)] = map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(readmeFile(t, f), ""), -1) {
			anchors[filepath.Clean(f)][anchorOf(m[1])] = true
		}
	}
	link := regexp.MustCompile(`\]\(([^)#:]*)#([^)]*)\)`)
	checked := 0
	for _, f := range files {
		for _, m := range link.FindAllStringSubmatch(readmeFile(t, f), -1) {
			target := filepath.Clean(f)
			if m[1] != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(f), m[1]))
			}
			names, ok := anchors[target]
			if !ok {
				continue // not a page of ours, or TestREADMELinksResolve reports it
			}
			assert.True(t, names[m[2]], "%s links to %s#%s, a section %s does not have", f, m[1], m[2], target)
			checked++
		}
	}
	assert.Greater(t, checked, 5, "the check found too few section links: it is not reading the pages")
}

// anchorOf is a heading's anchor as GitHub makes it: lower case, spaces
// to hyphens, every other character but letters, digits, '-' and '_'
// dropped.
func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func readmeFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}
