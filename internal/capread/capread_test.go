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
