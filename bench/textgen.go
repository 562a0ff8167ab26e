package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
)

// words is the vocabulary of every generated text: exactly 256 words, so
// one random byte picks one word and a 64-bit draw picks eight.
var words = [256]string{
	"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
	"he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were", "their",
	"one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no",
	"river", "castle", "lantern", "forest", "merchant", "sword", "harbor", "winter", "signal", "archive", "garden", "tower", "shadow", "letter", "market", "bridge",
	"engine", "window", "marble", "silver", "thunder", "compass", "orchard", "library", "painter", "captain", "village", "mirror", "ribbon", "anchor", "cellar", "meadow",
	"quiet", "bright", "hollow", "ancient", "restless", "gentle", "crooked", "golden", "narrow", "distant", "hidden", "broken", "patient", "vivid", "stubborn", "curious",
	"walks", "returns", "whispers", "builds", "forgets", "carries", "opens", "watches", "follows", "remembers", "gathers", "breaks", "answers", "waits", "counts", "burns",
	"buffer", "config", "handler", "request", "response", "context", "index", "record", "stream", "parser", "token", "schema", "cursor", "worker", "channel", "session",
	"value", "error", "result", "option", "client", "server", "packet", "header", "module", "vector", "matrix", "filter", "sorter", "reader", "writer", "tracker",
	"load", "store", "fetch", "merge", "split", "flush", "retry", "parse", "render", "encode", "decode", "commit", "resolve", "update", "delete", "insert",
	"north", "south", "east", "west", "morning", "evening", "autumn", "summer", "ember", "frost", "storm", "tide", "stone", "glass", "iron", "salt",
	"always", "never", "often", "rarely", "softly", "slowly", "quickly", "again", "almost", "together", "alone", "inside", "outside", "before", "after", "during",
	"memory", "promise", "journey", "secret", "question", "reason", "story", "chapter", "moment", "silence", "pattern", "measure", "border", "harvest", "voyage", "council",
	"alpha", "beta", "gamma", "delta", "sigma", "omega", "kappa", "lambda", "theta", "zeta", "iota", "rho", "tau", "phi", "chi", "psi",
	"red", "green", "blue", "amber", "violet", "crimson", "azure", "ivory", "ochre", "teal", "umber", "indigo", "scarlet", "jade", "slate", "pearl",
	"count", "limit", "offset", "length", "width", "height", "depth", "weight", "score", "level", "stage", "phase", "batch", "queue", "stack", "graph",
}

// textGen draws words, sentences and paragraphs from one seeded source.
type textGen struct{ r *rand.Rand }

func newTextGen(seed, stream uint64) textGen {
	return textGen{r: rand.New(rand.NewPCG(seed, stream))}
}

func (g textGen) word() string { return words[g.r.IntN(len(words))] }

// sentence returns n words, capitalized, ending with a period.
func (g textGen) sentence(n int) string {
	var b strings.Builder
	for i := range n {
		w := g.word()
		if i == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	b.WriteByte('.')
	return b.String()
}

// paragraph returns sentences until about size bytes, wrapped into lines
// of at most about 100 bytes so that line-based patches have lines to
// pick.
func (g textGen) paragraph(size int) []byte {
	var b bytes.Buffer
	line := 0
	for b.Len() < size {
		s := g.sentence(6 + g.r.IntN(10))
		if line > 0 && line+len(s) > 100 {
			b.WriteByte('\n')
			line = 0
		} else if line > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(s)
		line += len(s)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// ident returns an identifier made of one or two words.
func (g textGen) ident() string {
	if g.r.IntN(2) == 0 {
		return g.word()
	}
	w := g.word()
	return g.word() + strings.ToUpper(w[:1]) + w[1:]
}

// function returns one pseudo-source function of a few lines.
func (g textGen) function() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s %s\n", g.ident(), g.sentence(4+g.r.IntN(8)))
	fmt.Fprintf(&b, "func %s(%s int, %s string) (%s, error) {\n", g.ident(), g.ident(), g.ident(), g.ident())
	for range 2 + g.r.IntN(9) {
		switch g.r.IntN(4) {
		case 0:
			fmt.Fprintf(&b, "\t%s := %s(%s, %d)\n", g.ident(), g.ident(), g.ident(), g.r.IntN(1000))
		case 1:
			fmt.Fprintf(&b, "\tif %s != nil {\n\t\treturn %s, %s\n\t}\n", g.ident(), g.ident(), g.ident())
		case 2:
			fmt.Fprintf(&b, "\t%s.%s(%q)\n", g.ident(), g.ident(), g.word()+" "+g.word())
		default:
			fmt.Fprintf(&b, "\tfor %s := range %s {\n\t\t%s += %s\n\t}\n", g.ident(), g.ident(), g.ident(), g.ident())
		}
	}
	fmt.Fprintf(&b, "\treturn %s, nil\n}\n\n", g.ident())
	return b.Bytes()
}

// sourceFile returns the content of pseudo-source file id: functions until
// about size bytes. It is a pure function of (seed, id, size), so the
// generator can drop a file's content and regenerate it when it needs it.
func sourceFile(seed uint64, id, size int) []byte {
	g := newTextGen(seed, 1<<32+uint64(id))
	var b bytes.Buffer
	b.Grow(size + 512)
	fmt.Fprintf(&b, "// Package %s %s\npackage %s\n\n", g.word(), g.sentence(8), g.word())
	for b.Len() < size {
		b.Write(g.function())
	}
	return b.Bytes()
}

// randomBytes returns n incompressible bytes.
func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		u := r.Uint64()
		for k := 0; k < 8 && i+k < n; k++ {
			b[i+k] = byte(u >> (8 * k))
		}
	}
	return b
}

// lowerBytes returns n bytes of lowercase letters: what an in-place edit of
// a text file writes.
func lowerBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return b
}

// baseBlock is the unit of the large file's base text: block i is a pure
// function of (seed, i), so any offset can be produced without the bytes
// before it.
const baseBlock = 64 << 10

// fillBaseBlock writes block i of the base text into dst (len baseBlock):
// words separated by spaces, a newline about every 12 words.
func fillBaseBlock(dst []byte, seed uint64, i int64) {
	r := rand.New(rand.NewPCG(seed, 2<<32+uint64(i)))
	n := 0
	wordsOnLine := 0
	for n < len(dst) {
		u := r.Uint64()
		for k := 0; k < 8 && n < len(dst); k++ {
			n += copy(dst[n:], words[byte(u>>(8*k))])
			if n == len(dst) {
				break
			}
			wordsOnLine++
			if wordsOnLine == 12 {
				dst[n] = '\n'
				wordsOnLine = 0
			} else {
				dst[n] = ' '
			}
			n++
		}
	}
}

// baseReader streams bytes [off, end) of the base text.
type baseReader struct {
	seed     uint64
	off, end int64
	block    int64 // index of the block in buf; -1 for none
	buf      []byte
}

func newBaseReader(seed uint64, off, end int64, buf []byte) *baseReader {
	return &baseReader{seed: seed, off: off, end: end, block: -1, buf: buf}
}

func (r *baseReader) Read(p []byte) (int, error) {
	if r.off >= r.end {
		return 0, io.EOF
	}
	if bi := r.off / baseBlock; bi != r.block {
		fillBaseBlock(r.buf, r.seed, bi)
		r.block = bi
	}
	in := r.off % baseBlock
	n := copy(p, r.buf[in:min(int64(baseBlock), in+r.end-r.off)])
	r.off += int64(n)
	return n, nil
}
