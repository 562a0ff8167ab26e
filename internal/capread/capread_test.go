package capread_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/internal/capread"
)

// TestReader: a stream within its room reads to the end; one past it
// fails with the given error once the room is passed.
func TestReader(t *testing.T) {
	full := errors.New("full")
	b, err := io.ReadAll(capread.Reader(strings.NewReader("12345"), 5, full))
	assert.NoError(t, err)
	assert.Equal(t, "12345", string(b))
	_, err = io.ReadAll(capread.Reader(strings.NewReader("123456"), 5, full))
	assert.ErrorIs(t, err, full)
}

// TestBudgetIsShared: readers of one budget count against the room
// together, their first free bytes not at all; a release gives a reader's
// share back to readers that begin after it, not to one that began before
// its bytes were stored (whose room was measured without them).
func TestBudgetIsShared(t *testing.T) {
	var b capread.Budget
	full := errors.New("full")
	early := b.Mark() // a reader that begins now, room 100, reads later
	a, releaseA := b.Mark().Reader(strings.NewReader(strings.Repeat("a", 60)), 0, 100, full)
	if _, err := io.ReadAll(a); err != nil {
		t.Fatalf("60 of 100: %v", err)
	}
	c, releaseC := b.Mark().Reader(strings.NewReader(strings.Repeat("c", 50)), 0, 100, full)
	if _, err := io.ReadAll(c); !errors.Is(err, full) {
		t.Fatalf("60 + 50 of 100: %v, want full", err)
	}
	releaseC()
	releaseA()
	releaseA() // once only
	e, _ := early.Reader(strings.NewReader(strings.Repeat("e", 50)), 0, 100, full)
	if _, err := io.ReadAll(e); !errors.Is(err, full) {
		t.Fatalf("begun before 110 were counted, 50 more of 100: %v, want full", err)
	}
	// After the releases, a reader measures its room with the stored
	// bytes in it (here still 100): in flight are only e's 50.
	d, _ := b.Mark().Reader(strings.NewReader(strings.Repeat("d", 80)), 40, 100, full)
	if _, err := io.ReadAll(d); err != nil {
		t.Fatalf("50 in flight and 40 counted of 100: %v", err)
	}
}

// TestSizedReadersAreAdmittedInTurn: streams of a known size take it from
// the room as they begin: those that fit read to the end, one that does
// not fails at once having read nothing and taking nothing, so a smaller
// one after it still fits; bytes past the size still count.
func TestSizedReadersAreAdmittedInTurn(t *testing.T) {
	var b capread.Budget
	full := errors.New("full")
	src := func(n int) *strings.Reader { return strings.NewReader(strings.Repeat("x", n)) }
	var readers []io.Reader
	for range 3 {
		r, _, err := b.Mark().SizedReader(src(30), 0, 30, 100, full)
		assert.NoError(t, err)
		readers = append(readers, r)
	}
	untouched := src(30)
	_, _, err := b.Mark().SizedReader(untouched, 0, 30, 100, full)
	assert.ErrorIs(t, err, full, "90 taken, 30 more of 100")
	assert.Equal(t, 30, untouched.Len(), "nothing read")
	small, releaseSmall, err := b.Mark().SizedReader(src(10), 0, 10, 100, full)
	assert.NoError(t, err, "what the refused one did not take is still there")
	for _, r := range append(readers, small) {
		_, err := io.ReadAll(r)
		assert.NoError(t, err, "each reads what it took")
	}
	releaseSmall()
	longer, _, err := b.Mark().SizedReader(src(30), 0, 5, 100, full)
	assert.NoError(t, err)
	_, err = io.ReadAll(longer)
	assert.ErrorIs(t, err, full, "past its size it counts: 90 + 30 of 100")
	var fresh capread.Budget
	_, _, err = fresh.Mark().SizedReader(src(30), 25, 30, 5, full)
	assert.NoError(t, err, "its free bytes are not taken")
}
