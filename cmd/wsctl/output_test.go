package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/journal"
)

// TestCellEscapesWhatATerminalWouldHide: a cell shows text as it is,
// except characters a terminal would act on or hide: control
// characters, bytes that are not UTF-8, and format characters such as
// the bidi overrides that reorder what follows them on screen.
func TestCellEscapesWhatATerminalWouldHide(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text, ünïcode 漢字": "plain text, ünïcode 漢字",
		"tab\there":              `tab\there`,
		"line\nbreak":            `line\nbreak`,
		"esc \x1b[31mred":        `esc \x1b[31mred`,
		"bad \xff byte":          `bad \xff byte`,
		"evil\u202egnp.exe":      `evil\u202egnp.exe`,
		"isolate \u2066x\u2069":  `isolate \u2066x\u2069`,
		"zero\u200bwidth":        `zero\u200bwidth`,
	} {
		assert.Equal(t, want, cell(in), "%q", in)
	}
}

// TestSummarizeWithoutAReason: an ending without a reason is told by its
// type alone, not by its payload's JSON; a type without a summary of its
// own shows its payload.
func TestSummarizeWithoutAReason(t *testing.T) {
	t.Parallel()
	for _, typ := range []journal.Type{journal.RunFailed, journal.RunCancelled} {
		assert.Empty(t, summarize(journal.Event{Type: typ, Payload: []byte(`{"reason":""}`)}), typ)
		assert.Equal(t, "tool crashed", summarize(journal.Event{Type: typ, Payload: []byte(`{"reason":"tool crashed"}`)}), typ)
	}
	assert.Equal(t, `{"x":1}`, summarize(journal.Event{Type: "custom.event", Payload: []byte(`{"x":1}`)}))
}
