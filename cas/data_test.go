package cas_test

import (
	"context"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
)

// Test data comes from seeded generators, so every run stores the same
// bytes and a failure reproduces.

// randomReader returns an endless stream of incompressible bytes.
func randomReader(seed uint64) io.Reader {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return rand.NewChaCha8(s)
}

// randomBytes returns n incompressible bytes.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	_, _ = io.ReadFull(randomReader(seed), b)
	return b
}

var words = strings.Fields(`the of and to in a is that for it as was with be by on
not he I this are or his from at which but have an they you were her she there
one all we their been has when who will more no if out so said what up its about
into than them can only other new some could time these two may then do first any
my now such like our over man me even most made after also did many before must
through back years where much your way well down should because each just those
people how too little state good very make world still own see men work long get
here between both life being under never day same another know while last might us
great old year off come since against go came right used take three workspace
store blob chunk tree checkpoint rollback journal event run agent model tool file
path write read patch commit manifest artifact persist scratch output input plan
summary hash index migration transaction sqlite zstd delta snapshot version func
return error nil struct interface package import const var type range select case`)

// textReader returns an endless stream of pseudo-text: words drawn with a
// Zipf law, as in prose and code, in lines of a few words. It compresses
// about as well as real text does.
func textReader(seed uint64) io.Reader {
	r := rand.New(rand.NewPCG(seed, 0x7e57))
	return &text{r: r, z: rand.NewZipf(r, 1.2, 2, uint64(len(words)-1))}
}

type text struct {
	r    *rand.Rand
	z    *rand.Zipf
	line []byte
	pos  int
}

func (t *text) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if t.pos == len(t.line) {
			t.line, t.pos = t.line[:0], 0
			for k := 3 + t.r.IntN(10); k > 0; k-- {
				t.line = append(t.line, words[t.z.Uint64()]...)
				t.line = append(t.line, ' ')
			}
			t.line[len(t.line)-1] = '\n'
		}
		c := copy(p[n:], t.line[t.pos:])
		t.pos += c
		n += c
	}
	return n, nil
}

// textBytes returns n bytes of pseudo-text.
func textBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	_, _ = io.ReadFull(textReader(seed), b)
	return b
}

// count returns the result of a count query.
func count(t testing.TB, db *index.DB, query string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	var n int
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &n, query, args...)
	}))
	return n
}

// exec runs one statement in its own write transaction.
func exec(t testing.TB, db *index.DB, query string, args ...any) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	}))
}
