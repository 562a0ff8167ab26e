package vfs

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wsstore/wsstore/wserr"
)

// Search limits (SearchOptions documents the defaults).
const (
	// DefaultSearchHits is SearchOptions.MaxHits when it is 0, and
	// MaxSearchHits the most it may be.
	DefaultSearchHits = 20
	MaxSearchHits     = 200
	defaultMaxFiles   = 2000

	// maxQueryTerms bounds the distinct words of a query that count, so
	// that a pasted paragraph cannot make every line cost hundreds of
	// lookups.
	maxQueryTerms = 32
	// scoreWindowLines is the height of the window ScoreText slides over
	// a file: enough for a paragraph or a function head, small enough that
	// the snippet shows why the file matched.
	scoreWindowLines = 8
	// maxSnippetBytes caps a hit's snippet.
	maxSnippetBytes = 400
)

// MaxSearchFile is the largest file a search reads, stored or on the
// host: scoring holds a file whole, several times over, so a larger one
// (a log, a data dump) is passed over rather than let hold a search's
// memory; read it by line ranges instead.
const MaxSearchFile = 4 << 20

// Tokenize lowercases s and splits it into words at every rune that is not
// a letter, digit or combining mark. Han, Hiragana, Katakana and Hangul
// runes are each a word of their own, since those scripts do not separate
// words with spaces: without it a Chinese sentence would be one long token
// no query could match. Query and content go through the same function, so
// a multi-character CJK query still matches as consecutive single runes.
func Tokenize(s string) []string {
	var out []string
	scanWords(s, func(w string, _ int) { out = append(out, w) })
	return out
}

// scanWords calls fn with each word of s as Tokenize defines it and the
// byte offset where it starts.
func scanWords(s string, fn func(word string, off int)) {
	start := -1
	emit := func(end int) {
		if start >= 0 {
			fn(strings.ToLower(s[start:end]), start)
			start = -1
		}
	}
	for i, r := range s {
		switch {
		case isIdeographic(r):
			emit(i)
			fn(string(r), i)
		case unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			if start < 0 {
				start = i
			}
		default:
			emit(i)
		}
	}
	emit(len(s))
}

// isIdeographic reports whether r belongs to a script that Tokenize splits
// rune by rune. The katakana prolonged sound mark (ー) is in the Common
// script but only ever appears inside katakana words, so it goes with them.
func isIdeographic(r rune) bool {
	if r < 0x1100 {
		return false // fast path for Latin and friends
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) || r == 'ー'
}

// scoreQuery is a query prepared for scoring: its distinct words in query
// order and the pairs of words that follow each other in it, which reward
// a phrase (above all a CJK word spelled as several one-rune tokens) over
// the same words scattered.
type scoreQuery struct {
	terms []string
	index map[string]int
	pairs map[[2]int]bool
}

func newScoreQuery(tokens []string) scoreQuery {
	q, add := buildScoreQuery()
	for _, t := range tokens {
		if !add(t) {
			break
		}
	}
	return *q
}

// parseScoreQuery is newScoreQuery of Tokenize(s), holding only the
// distinct words: a query that repeats a word a million times costs no
// more than one that says it once.
func parseScoreQuery(s string) scoreQuery {
	q, add := buildScoreQuery()
	done := false
	scanWords(s, func(w string, _ int) {
		if !done {
			done = !add(w)
		}
	})
	return *q
}

// buildScoreQuery returns an empty query and the function that adds the
// query's next word to it, which reports false once a word past
// maxQueryTerms ends the query.
func buildScoreQuery() (*scoreQuery, func(string) bool) {
	q := &scoreQuery{index: make(map[string]int), pairs: make(map[[2]int]bool)}
	prev := -1
	return q, func(t string) bool {
		i, ok := q.index[t]
		if !ok {
			if len(q.terms) == maxQueryTerms {
				return false
			}
			i = len(q.terms)
			q.index[t] = i
			q.terms = append(q.terms, t)
		}
		if prev >= 0 && prev != i {
			q.pairs[[2]int{prev, i}] = true
		}
		prev = i
		return true
	}
}

// lineMatch records the query words on one line of a file.
type lineMatch struct {
	line  int   // 0-based line number
	terms []int // index of each query word occurrence
	pairs int   // query word pairs found next to each other
	first int   // byte offset in the file of the first match
}

// window is the best stretch of a file for a query: its line range
// (0-based, inclusive), how often each query word occurs in it, how many
// query pairs it holds, and its length in words.
type window struct {
	start, end int
	tf         []int
	pairs      int
	words      int
	first      int // byte offset of its first match
}

// Scoring constants, BM25's usual k1 and a mild length normalisation
// against a fixed reference length: windows are compared across files, so
// the reference cannot be a per-file average.
const (
	bm25K1       = 1.2
	bm25B        = 0.5
	refWindowLen = 64.0
	pairWeight   = 0.5
)

// score rates w with the given word weights: saturated term frequencies,
// a bonus for adjacent query pairs, all scaled by the share of the query's
// weight that the window covers, so a window with every word beats one that
// repeats a single word.
func (q *scoreQuery) score(w window, weights []float64) float64 {
	norm := 1 - bm25B + bm25B*float64(w.words)/refWindowLen
	sat := func(tf int) float64 {
		f := float64(tf)
		return f * (bm25K1 + 1) / (f + bm25K1*norm)
	}
	var base, covered, total float64
	for i, tf := range w.tf {
		total += weights[i]
		if tf > 0 {
			base += weights[i] * sat(tf)
			covered += weights[i]
		}
	}
	if total == 0 || covered == 0 {
		return 0
	}
	if w.pairs > 0 {
		base += pairWeight * total / float64(len(weights)) * sat(w.pairs)
	}
	return base * covered / total
}

// best finds the best window of content for q under uniform weights. It
// returns false when no query word occurs. Only windows that start and end
// on a matching line are considered: any other window is matched or beaten
// by the one that starts at its first match, and trimming it keeps the
// snippet on the matches.
func (q *scoreQuery) best(content []byte) (window, bool) {
	var matches []lineMatch
	var wordsBefore []int // words on lines before each line, for lengths
	total := 0
	line := 0
	for off := 0; off <= len(content); line++ {
		end := bytes.IndexByte(content[off:], '\n')
		if end < 0 {
			end = len(content)
		} else {
			end += off
		}
		if off == len(content) && line > 0 {
			break // a trailing newline does not start a line
		}
		wordsBefore = append(wordsBefore, total)
		m := lineMatch{line: line, first: -1}
		prev := -1
		scanWords(string(content[off:end]), func(word string, at int) {
			total++
			i, ok := q.index[word]
			if !ok {
				prev = -1
				return
			}
			if m.first < 0 {
				m.first = off + at
			}
			m.terms = append(m.terms, i)
			if prev >= 0 && q.pairs[[2]int{prev, i}] {
				m.pairs++
			}
			prev = i
		})
		if len(m.terms) > 0 {
			matches = append(matches, m)
		}
		off = end + 1
	}
	wordsBefore = append(wordsBefore, total)
	if len(matches) == 0 {
		return window{}, false
	}

	uniform := make([]float64, len(q.terms))
	for i := range uniform {
		uniform[i] = 1
	}
	tf := make([]int, len(q.terms))
	pairs := 0
	var bestW window
	bestScore := -1.0
	k := 0 // matches[i:k] are in the window
	for i := range matches {
		for k < len(matches) && matches[k].line < matches[i].line+scoreWindowLines {
			for _, t := range matches[k].terms {
				tf[t]++
			}
			pairs += matches[k].pairs
			k++
		}
		w := window{
			start: matches[i].line,
			end:   matches[k-1].line,
			tf:    tf,
			pairs: pairs,
			words: wordsBefore[matches[k-1].line+1] - wordsBefore[matches[i].line],
			first: matches[i].first,
		}
		if s := q.score(w, uniform); s > bestScore {
			bestScore = s
			w.tf = slices.Clone(tf)
			bestW = w
		}
		for _, t := range matches[i].terms {
			tf[t]--
		}
		pairs -= matches[i].pairs
	}
	return bestW, true
}

// ScoreText scores content against the query words (as Tokenize returns
// them) over a sliding window of 8 lines with BM25-style saturation, every
// word weighted alike, and a bonus for query words found next to each
// other in query order. It returns the best window's score, its line range
// (1-based, inclusive, trimmed to the lines that match) and a snippet of
// those lines of at most about 400 bytes, centred on the first match if
// the lines are longer. The score is 0 and the rest empty when no query
// word occurs. Equal inputs give equal outputs.
func ScoreText(query []string, content []byte) (score float64, startLine, endLine int, snippet string) {
	q := newScoreQuery(query)
	if len(q.terms) == 0 {
		return 0, 0, 0, ""
	}
	w, ok := q.best(content)
	if !ok {
		return 0, 0, 0, ""
	}
	weights := make([]float64, len(q.terms))
	for i := range weights {
		weights[i] = 1
	}
	return q.score(w, weights), w.start + 1, w.end + 1, windowSnippet(content, w)
}

// windowSnippet returns the text of w's lines, cut to maxSnippetBytes
// around its first match, at rune boundaries, with "…" where it was cut.
func windowSnippet(content []byte, w window) string {
	starts := lineOffsets(content)
	from := starts[w.start]
	to := len(content)
	if w.end+1 < len(starts) {
		to = starts[w.end+1]
	}
	text := bytes.TrimRight(content[from:to], "\r\n")
	if len(text) <= maxSnippetBytes {
		return string(text)
	}
	// Show a little context before the first match, then as much after
	// it as fits.
	lo := max(0, w.first-from-maxSnippetBytes/4)
	for lo > 0 && !utf8.RuneStart(text[lo]) {
		lo--
	}
	hi := min(len(text), lo+maxSnippetBytes)
	for hi < len(text) && !utf8.RuneStart(text[hi]) {
		hi--
	}
	var b strings.Builder
	if lo > 0 {
		b.WriteString("…")
	}
	b.Write(text[lo:hi])
	if hi < len(text) {
		b.WriteString("…")
	}
	return b.String()
}

// Searcher ranks files against one query. Files are offered one at a time
// with Add; Hits returns the best. It is not safe for concurrent use.
//
// Each file is scored by its best window as in ScoreText; Hits then weighs
// every query word by its rarity across the text files offered (an idf,
// BM25's formula), so that a file matching the rare word of "the dragon"
// ranks above one full of "the". That weighting needs every file's counts,
// so the Searcher keeps one small candidate per matching file (at most
// MaxFiles of them) rather than only MaxHits.
type Searcher struct {
	q     scoreQuery
	opt   SearchOptions
	files int   // files offered and counted against MaxFiles
	texts int   // text files scored: the corpus size for idf
	df    []int // text files containing each query word
	cands []searchCandidate
	skip  []SkippedMount
}

type searchCandidate struct {
	path    Path
	w       window
	snippet string
}

// NewSearcher returns a Searcher for query. Zero options take their
// defaults (MaxHits 20, MaxFiles 2000, Path the root). It fails with
// wserr.InvalidArgument if the query has no words, MaxHits is negative or
// above 200, or MaxFiles is negative.
func NewSearcher(query string, opt SearchOptions) (*Searcher, error) {
	const op = "search"
	switch {
	case opt.MaxHits < 0 || opt.MaxHits > MaxSearchHits:
		return nil, wserr.New(wserr.InvalidArgument, op, "", "maxHits %d is out of range; give 1 to %d, or 0 for %d", opt.MaxHits, MaxSearchHits, DefaultSearchHits)
	case opt.MaxFiles < 0:
		return nil, wserr.New(wserr.InvalidArgument, op, "", "maxFiles %d is negative; give 0 for the default of %d", opt.MaxFiles, defaultMaxFiles)
	}
	if opt.MaxHits == 0 {
		opt.MaxHits = DefaultSearchHits
	}
	if opt.MaxFiles == 0 {
		opt.MaxFiles = defaultMaxFiles
	}
	q := parseScoreQuery(query)
	if len(q.terms) == 0 {
		return nil, wserr.New(wserr.InvalidArgument, op, "", "query %s has no words to search for", quoteForError(query))
	}
	return &Searcher{q: q, opt: opt, df: make([]int, len(q.terms))}, nil
}

// Options returns the options in effect, defaults filled in.
func (s *Searcher) Options() SearchOptions { return s.opt }

// Full reports whether MaxFiles files have been offered, so that a caller
// walking a large tree can stop early; later Adds are ignored.
func (s *Searcher) Full() bool { return s.files >= s.opt.MaxFiles }

// Add offers the file p with its content. Files outside the options' Path
// and files over MaxSearchFile are ignored without counting, files past
// MaxFiles are ignored, and files that are not text count against
// MaxFiles but are not scored.
func (s *Searcher) Add(p Path, content []byte) {
	if !p.HasPrefix(s.opt.Path) || len(content) > MaxSearchFile || s.Full() {
		return
	}
	s.files++
	if !IsText(content) {
		return
	}
	s.texts++
	w, ok := s.q.best(content)
	if !ok {
		return
	}
	for i, tf := range w.tf {
		if tf > 0 {
			s.df[i]++
		}
	}
	// A word can occur in the file but outside its best window; df must
	// count it all the same, or the weights would depend on windowing.
	if slices.Contains(w.tf, 0) {
		s.countOutsideWindow(content, w)
	}
	s.cands = append(s.cands, searchCandidate{path: p, w: w, snippet: windowSnippet(content, w)})
}

// countOutsideWindow adds to df the query words that occur in content but
// not in w.
func (s *Searcher) countOutsideWindow(content []byte, w window) {
	seen := slices.Clone(w.tf)
	scanWords(string(content), func(word string, _ int) {
		if i, ok := s.q.index[word]; ok && seen[i] == 0 {
			seen[i] = 1
			s.df[i]++
		}
	})
}

// Hits returns the best MaxHits files, by score (highest first) and then
// path. Scores are rounded to four decimals so that ties are ties.
func (s *Searcher) Hits() []Hit {
	weights := make([]float64, len(s.q.terms))
	n := float64(s.texts)
	for i, df := range s.df {
		d := float64(df)
		weights[i] = math.Log(1 + (n-d+0.5)/(d+0.5))
	}
	hits := make([]Hit, 0, len(s.cands))
	for _, c := range s.cands {
		score := math.Round(s.q.score(c.w, weights)*1e4) / 1e4
		hits = append(hits, Hit{
			Path:      c.path,
			Score:     score,
			StartLine: c.w.start + 1,
			EndLine:   c.w.end + 1,
			Snippet:   c.snippet,
		})
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return comparePathSegments(a.Path, b.Path)
	})
	if len(hits) > s.opt.MaxHits {
		hits = hits[:s.opt.MaxHits]
	}
	return hits
}

// Skip records that the search passed over the virtual mount at prefix,
// whose provider failed with err.
func (s *Searcher) Skip(prefix Path, err error) {
	s.skip = append(s.skip, SkippedMount{Path: prefix, Code: wserr.CodeOf(err), Message: wserr.MessageOf(err)})
}

// Result returns Hits and the mounts Skip recorded.
func (s *Searcher) Result() SearchResult {
	return SearchResult{Hits: s.Hits(), Skipped: s.skip}
}

// comparePathSegments orders paths segment by segment, the order List
// returns, so "a/b" sorts before "a-c" although '-' < '/'.
func comparePathSegments(a, b Path) int {
	as, bs := a.s, b.s
	for as != "" && bs != "" {
		ah, at, _ := strings.Cut(as, "/")
		bh, bt, _ := strings.Cut(bs, "/")
		if c := strings.Compare(ah, bh); c != 0 {
			return c
		}
		as, bs = at, bt
	}
	return cmp.Compare(len(as), len(bs))
}
