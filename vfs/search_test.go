package vfs

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/wserr"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"OKEmpty", "", nil},
		{"OKPunctuationOnly", "—!? ...", nil},
		{"OKLowercases", "Hello, World!", []string{"hello", "world"}},
		{"OKSplitsOnSymbols", "foo_bar-baz42 x.y", []string{"foo", "bar", "baz42", "x", "y"}},
		{"OKAccents", "Café ÜBER naïve", []string{"café", "über", "naïve"}},
		{"OKCombiningMarksStayInWord", "हिन्दी भाषा", []string{"हिन्दी", "भाषा"}},
		{"OKChineseRuneByRune", "世界书很好。", []string{"世", "界", "书", "很", "好"}},
		{"OKMixedScripts", "Agent模式ON", []string{"agent", "模", "式", "on"}},
		{"OKJapanese", "ひらがなとカタカナ", []string{"ひ", "ら", "が", "な", "と", "カ", "タ", "カ", "ナ"}},
		{"OKProlongedSoundMark", "コーヒー", []string{"コ", "ー", "ヒ", "ー"}},
		{"OKKorean", "한국어 text", []string{"한", "국", "어", "text"}},
		{"OKDigits", "v1.2 ٣٤", []string{"v1", "2", "٣٤"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Tokenize(tt.in))
		})
	}
}

func TestScoreText(t *testing.T) {
	t.Run("ZeroWithoutMatch", func(t *testing.T) {
		score, start, end, snippet := ScoreText(Tokenize("dragon"), []byte("no such word\nhere\n"))
		assert.Zero(t, score)
		assert.Zero(t, start)
		assert.Zero(t, end)
		assert.Empty(t, snippet)
	})

	t.Run("ZeroForEmptyQuery", func(t *testing.T) {
		score, _, _, _ := ScoreText(nil, []byte("anything"))
		assert.Zero(t, score)
	})

	t.Run("OKSingleLine", func(t *testing.T) {
		score, start, end, snippet := ScoreText(Tokenize("dragon"), []byte("intro\nthe Dragon sleeps\noutro\n"))
		assert.Positive(t, score)
		assert.Equal(t, 2, start)
		assert.Equal(t, 2, end)
		assert.Equal(t, "the Dragon sleeps", snippet)
	})

	t.Run("OKPrefersWindowWithAllWords", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("dragon alone\n")
		for range 20 {
			b.WriteString("filler text\n")
		}
		b.WriteString("sword alone\n")
		for range 20 {
			b.WriteString("filler text\n")
		}
		b.WriteString("the dragon drew\nits sword\n") // lines 43-44
		_, start, end, snippet := ScoreText(Tokenize("dragon sword"), []byte(b.String()))
		assert.Equal(t, 43, start)
		assert.Equal(t, 44, end)
		assert.Equal(t, "the dragon drew\nits sword", snippet)
	})

	t.Run("OKWindowIsEightLines", func(t *testing.T) {
		content := "alpha\n1\n2\n3\n4\n5\n6\n7\n8\nbeta\n"
		_, start, end, _ := ScoreText(Tokenize("alpha beta"), []byte(content))
		assert.Equal(t, start, end, "alpha and beta are 9 lines apart: never in one window")
		content = "alpha\n1\n2\n3\n4\n5\n6\nbeta\n"
		_, start, end, _ = ScoreText(Tokenize("alpha beta"), []byte(content))
		assert.Equal(t, [2]int{1, 8}, [2]int{start, end})
	})

	t.Run("OKPhraseBeatsScatteredWords", func(t *testing.T) {
		phrase, _, _, _ := ScoreText(Tokenize("世界书"), []byte("激活的世界书条目\n"))
		scattered, _, _, _ := ScoreText(Tokenize("世界书"), []byte("书在桌上\n世上\n界限\n"))
		assert.Greater(t, phrase, scattered)
	})

	t.Run("OKMoreOccurrencesScoreHigherButSaturate", func(t *testing.T) {
		one, _, _, _ := ScoreText([]string{"x"}, []byte("x a b c\n"))
		two, _, _, _ := ScoreText([]string{"x"}, []byte("x x b c\n"))
		many, _, _, _ := ScoreText([]string{"x"}, []byte(strings.Repeat("x ", 50)+"\n"))
		assert.Greater(t, two, one)
		assert.Less(t, many, 2.2+1e-9, "term frequency saturates at k1+1")
	})

	t.Run("OKDeterministic", func(t *testing.T) {
		content := []byte(strings.Repeat("a dragon and a sword\nnothing\n", 30))
		s1, a1, b1, n1 := ScoreText(Tokenize("dragon sword"), content)
		s2, a2, b2, n2 := ScoreText(Tokenize("dragon sword"), content)
		assert.Equal(t, []any{s1, a1, b1, n1}, []any{s2, a2, b2, n2})
		assert.Equal(t, 1, a1, "ties go to the earliest window")
	})

	t.Run("OKSnippetCappedAroundMatch", func(t *testing.T) {
		line := strings.Repeat("世界 ", 300) + "needle " + strings.Repeat("haystack ", 100)
		_, start, end, snippet := ScoreText([]string{"needle"}, []byte(line))
		assert.Equal(t, 1, start)
		assert.Equal(t, 1, end)
		assert.Contains(t, snippet, "needle")
		assert.LessOrEqual(t, len(snippet), maxSnippetBytes+2*len("…"))
		assert.True(t, utf8.ValidString(snippet), "cut at rune boundaries")
		assert.True(t, strings.HasPrefix(snippet, "…") && strings.HasSuffix(snippet, "…"))
	})
}

func TestNewSearcher(t *testing.T) {
	t.Run("OKDefaults", func(t *testing.T) {
		s, err := NewSearcher("dragon", SearchOptions{})
		require.NoError(t, err)
		assert.Equal(t, DefaultSearchHits, s.Options().MaxHits)
		assert.Equal(t, defaultMaxFiles, s.Options().MaxFiles)
		assert.Empty(t, s.Hits())
	})

	tests := []struct {
		name  string
		query string
		opt   SearchOptions
	}{
		{"ErrEmptyQuery", "", SearchOptions{}},
		{"ErrQueryWithoutWords", " ?! ", SearchOptions{}},
		{"ErrNegativeMaxHits", "x", SearchOptions{MaxHits: -1}},
		{"ErrMaxHitsAboveLimit", "x", SearchOptions{MaxHits: MaxSearchHits + 1}},
		{"ErrNegativeMaxFiles", "x", SearchOptions{MaxFiles: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSearcher(tt.query, tt.opt)
			assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "error: %v", err)
		})
	}
}

// searchHits runs a Searcher over files in the given order.
func searchHits(t *testing.T, query string, opt SearchOptions, order []string, files map[string]string) []Hit {
	t.Helper()
	s, err := NewSearcher(query, opt)
	require.NoError(t, err)
	for _, name := range order {
		s.Add(MustPath(name), []byte(files[name]))
	}
	return s.Hits()
}

func hitPaths(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Path.String()
	}
	return out
}

func TestSearcher(t *testing.T) {
	t.Run("OKRanksByRelevance", func(t *testing.T) {
		files := map[string]string{
			"both.md":   "intro\nThe dragon guards a sword.\n",
			"dragon.md": "a dragon\n",
			"sword.md":  "a sword\n",
			"none.md":   "nothing relevant\n",
			"blob.bin":  "dragon sword\x00",
		}
		hits := searchHits(t, "dragon sword", SearchOptions{}, []string{"blob.bin", "both.md", "dragon.md", "none.md", "sword.md"}, files)
		require.Len(t, hits, 3, "no hit for a file without the words or for binary content")
		assert.Equal(t, "both.md", hits[0].Path.String())
		assert.Equal(t, 2, hits[0].StartLine)
		assert.Equal(t, "The dragon guards a sword.", hits[0].Snippet)
		assert.Greater(t, hits[0].Score, hits[1].Score)
		assert.Equal(t, hits[1].Score, hits[2].Score, "one word each, equally rare")
		assert.Equal(t, []string{"dragon.md", "sword.md"}, hitPaths(hits[1:]), "ties by path")
	})

	t.Run("OKRareWordOutweighsCommonOne", func(t *testing.T) {
		files := map[string]string{"rare.md": "here be a dragon\n", "common.md": "the the the the\n"}
		order := []string{"common.md", "rare.md"}
		for i := range 8 {
			name := fmt.Sprintf("filler%d.md", i)
			files[name] = "the cat sat on the mat\n"
			order = append(order, name)
		}
		hits := searchHits(t, "the dragon", SearchOptions{}, order, files)
		require.NotEmpty(t, hits)
		assert.Equal(t, "rare.md", hits[0].Path.String())
	})

	t.Run("OKChinese", func(t *testing.T) {
		files := map[string]string{
			"a.md": "本轮激活的世界书条目如下。\n",
			"b.md": "书\n世\n界\n",
			"c.md": "没有相关内容\n",
		}
		hits := searchHits(t, "世界书", SearchOptions{}, []string{"a.md", "b.md", "c.md"}, files)
		assert.Equal(t, []string{"a.md", "b.md"}, hitPaths(hits))
		assert.Greater(t, hits[0].Score, hits[1].Score)
	})

	t.Run("OKAddOrderDoesNotMatter", func(t *testing.T) {
		files := map[string]string{
			"a.md": "dragon sword\n", "b.md": "dragon\n", "c.md": "sword sword\n", "d.md": "the dragon\nsword\n",
		}
		h1 := searchHits(t, "dragon sword", SearchOptions{}, []string{"a.md", "b.md", "c.md", "d.md"}, files)
		h2 := searchHits(t, "dragon sword", SearchOptions{}, []string{"d.md", "c.md", "b.md", "a.md"}, files)
		assert.Equal(t, h1, h2)
	})

	t.Run("OKMaxHitsKeepsBest", func(t *testing.T) {
		files := map[string]string{}
		var order []string
		for _, n := range []string{"e", "d", "c", "b", "a"} {
			files[n+".md"] = "dragon\n"
			order = append(order, n+".md")
		}
		hits := searchHits(t, "dragon", SearchOptions{MaxHits: 3}, order, files)
		assert.Equal(t, []string{"a.md", "b.md", "c.md"}, hitPaths(hits))
	})

	t.Run("OKMaxFilesStopsAdding", func(t *testing.T) {
		s, err := NewSearcher("dragon", SearchOptions{MaxFiles: 2})
		require.NoError(t, err)
		s.Add(MustPath("a.md"), []byte("dragon"))
		assert.False(t, s.Full())
		s.Add(MustPath("b.bin"), []byte("\x00"))
		assert.True(t, s.Full(), "binary files count against MaxFiles")
		s.Add(MustPath("c.md"), []byte("dragon"))
		assert.Equal(t, []string{"a.md"}, hitPaths(s.Hits()))
	})

	t.Run("OKPathFilter", func(t *testing.T) {
		files := map[string]string{"docs/a.md": "dragon", "docs-old/b.md": "dragon", "c.md": "dragon"}
		hits := searchHits(t, "dragon", SearchOptions{Path: MustPath("docs")}, []string{"c.md", "docs-old/b.md", "docs/a.md"}, files)
		assert.Equal(t, []string{"docs/a.md"}, hitPaths(hits))
	})
}

func TestComparePathSegments(t *testing.T) {
	assert.Negative(t, comparePathSegments(MustPath("a/b"), MustPath("a-c")), "segment order, not byte order")
	assert.Negative(t, comparePathSegments(Root(), MustPath("a")))
	assert.Negative(t, comparePathSegments(MustPath("a"), MustPath("a/b")))
	assert.Zero(t, comparePathSegments(MustPath("a/b"), MustPath("a/b")))
	assert.Positive(t, comparePathSegments(MustPath("b"), MustPath("a/z")))
}

func BenchmarkScoreText(b *testing.B) {
	var sb strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&sb, "line %d of a long document about dragons, swords and 世界书 entries\n", i)
	}
	content := []byte(sb.String())
	query := Tokenize("dragon sword 世界书")
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		ScoreText(query, content)
	}
}

// TestNewSearcherLongQueryMemory: a query of any length (a line of
// wsctl batch may hold 64 MiB) costs memory for its distinct words, at most
// maxQueryTerms of them, never for every word it repeats.
func TestNewSearcherLongQueryMemory(t *testing.T) {
	alloc := func(words int) uint64 {
		query := "Dragon " + strings.Repeat("dragon keep ", words)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := NewSearcher(query, SearchOptions{})
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		assert.Equal(t, []string{"dragon", "keep"}, s.q.terms)
		assert.Equal(t, map[[2]int]bool{{0, 1}: true, {1, 0}: true}, s.q.pairs)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := alloc(1000), alloc(1<<20)
	t.Logf("allocated %d B for 2,000 words, %d B for 2,097,152", small, large)
	assert.Less(t, large, small+1<<20, "a query's memory does not grow with the words it repeats")
}
