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
// together, their first free bytes not at all, and a release gives a
// reader's share back.
func TestBudgetIsShared(t *testing.T) {
	var b capread.Budget
	full := errors.New("full")
	a, releaseA := b.Reader(strings.NewReader(strings.Repeat("a", 60)), 0, 100, full)
	_, err := io.ReadAll(a)
	if err != nil {
		t.Fatalf("60 of 100: %v", err)
	}
	c, releaseC := b.Reader(strings.NewReader(strings.Repeat("c", 50)), 0, 100, full)
	if _, err := io.ReadAll(c); !errors.Is(err, full) {
		t.Fatalf("60 + 50 of 100: %v, want full", err)
	}
	releaseC()
	releaseA()
	releaseA() // once only
	d, _ := b.Reader(strings.NewReader(strings.Repeat("d", 130)), 40, 100, full)
	if _, err := io.ReadAll(d); err != nil {
		t.Fatalf("released: 90 counted of 100: %v", err)
	}
}
