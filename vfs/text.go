package vfs

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/wsstore/wsstore/wserr"
)

// IsText reports whether b is valid UTF-8 without NUL bytes: what tools may
// read as text and patch. The empty file is text.
func IsText(b []byte) bool {
	return bytes.IndexByte(b, 0) < 0 && utf8.Valid(b)
}

// ReadRange applies opt to content, the whole file at p, and fills
// res.Content, Text, StartLine, EndLine, TotalLines and Truncated; res.Info
// is left to the caller. res.Content shares memory with content.
//
// Lines are split on '\n'; a trailing newline does not start another line,
// and returned text keeps its line endings. A line range is 1-based and
// inclusive (StartLine 0 means 1, EndLine 0 means to the end, an EndLine past
// the end is clamped). A char range counts runes from 0, EndChar exclusive
// (0 means to the end, past the end is clamped). Truncated is true when the
// range left part of the file out, so a tool can tell the model there is
// more. Without a range the whole content is returned, with Text set only
// when IsText(content).
//
// Errors (*wserr.Error, op "read", path p): wserr.InvalidArgument if both a
// line and a char range are set; wserr.NotText for a range on content that
// is not text; wserr.InvalidLineRange for a negative bound, EndLine before
// StartLine, or StartLine past the last line (the message gives the file's
// line count); wserr.InvalidCharRange likewise for chars.
func ReadRange(p Path, content []byte, opt ReadOptions) (ReadResult, error) {
	const op = "read"
	lineRange, charRange := opt.ranges()
	if lineRange && charRange {
		return ReadResult{}, wserr.New(wserr.InvalidArgument, op, p.String(),
			"give either a line range or a char range, not both")
	}
	text := IsText(content)
	if (lineRange || charRange) && !text {
		return ReadResult{}, wserr.New(wserr.NotText, op, p.String(),
			"file is not UTF-8 text, so it has no lines or chars to select; read it whole")
	}
	switch {
	case lineRange:
		return readLines(p, content, opt.StartLine, opt.EndLine)
	case charRange:
		return readChars(p, content, opt.StartChar, opt.EndChar)
	}
	res := ReadResult{Content: content}
	if text {
		res.Text = string(content)
		res.TotalLines = countLines(content)
	}
	return res, nil
}

// readLines implements ReadRange for a line range on text content.
func readLines(p Path, content []byte, start, end int) (ReadResult, error) {
	starts := lineOffsets(content)
	total := len(starts)
	bad := func(format string, args ...any) (ReadResult, error) {
		return ReadResult{}, wserr.New(wserr.InvalidLineRange, "read", p.String(),
			format+" (the file has %s)", append(args, countNoun(total, "line"))...)
	}
	if start == 0 {
		start = 1
	}
	switch {
	case start < 0:
		return bad("startLine %d is negative; lines count from 1", start)
	case end < 0:
		return bad("endLine %d is negative; use 0 to read to the end", end)
	case end != 0 && end < start:
		return bad("endLine %d is before startLine %d", end, start)
	case total == 0 && start == 1:
		// An empty file has no lines, yet a tool that always asks for the
		// range from line 1 should get the empty file rather than an
		// error it cannot act on.
		return ReadResult{Content: content[:0], StartLine: 1, EndLine: 0, TotalLines: 0}, nil
	case start > total:
		return bad("startLine %d is past the last line", start)
	}
	if end == 0 || end > total {
		end = total
	}
	from := starts[start-1]
	to := len(content)
	if end < total {
		to = starts[end]
	}
	sub := content[from:to]
	return ReadResult{
		Content:    sub,
		Text:       string(sub),
		StartLine:  start,
		EndLine:    end,
		TotalLines: total,
		Truncated:  len(sub) < len(content),
	}, nil
}

// readChars implements ReadRange for a char range on text content.
func readChars(p Path, content []byte, start, end int) (ReadResult, error) {
	runes := utf8.RuneCount(content)
	bad := func(format string, args ...any) (ReadResult, error) {
		return ReadResult{}, wserr.New(wserr.InvalidCharRange, "read", p.String(),
			format+" (the file has %s)", append(args, countNoun(runes, "char"))...)
	}
	switch {
	case start < 0:
		return bad("startChar %d is negative; chars count from 0", start)
	case end < 0:
		return bad("endChar %d is negative; use 0 to read to the end", end)
	case end != 0 && end < start:
		return bad("endChar %d is before startChar %d", end, start)
	case start > runes:
		return bad("startChar %d is past the end", start)
	}
	if end == 0 || end > runes {
		end = runes
	}
	from := runeOffset(content, 0, 0, start)
	to := runeOffset(content, from, start, end)
	sub := content[from:to]
	return ReadResult{
		Content:    sub,
		Text:       string(sub),
		TotalLines: countLines(content),
		Truncated:  len(sub) < len(content),
	}, nil
}

// runeOffset returns the byte offset of rune n in b, scanning from byte
// offset off, which is rune at.
func runeOffset(b []byte, off, at, n int) int {
	for at < n && off < len(b) {
		_, size := utf8.DecodeRune(b[off:])
		off += size
		at++
	}
	return off
}

// lineOffsets returns the byte offset at which each line of b starts.
func lineOffsets(b []byte) []int {
	if len(b) == 0 {
		return nil
	}
	starts := make([]int, 1, bytes.Count(b, []byte{'\n'})+1)
	for i, c := range b {
		if c == '\n' && i+1 < len(b) {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// countLines returns the number of lines in b as ReadRange counts them.
func countLines(b []byte) int {
	n := bytes.Count(b, []byte{'\n'})
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// maxQuotedError bounds how much of an argument an error quotes back, so
// a huge argument does not come back as a huge tool error.
const maxQuotedError = 256

// quoteForError quotes s for an error message, cut to maxQuotedError bytes
// and marked "..." if longer, so control bytes cannot reach logs raw.
func quoteForError(s string) string {
	if len(s) <= maxQuotedError {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxQuotedError]) + "..."
}

// countNoun formats n with a noun, "1 line" or "3 lines".
func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// ApplyPatch replaces old with new in content, the file at p, and returns
// the new content and the number of replacements. Unless replaceAll is set,
// old must occur exactly once, so that a patch never lands somewhere the
// model did not look.
//
// Errors (*wserr.Error, op "patch", path p): wserr.NotText if content is
// not text; wserr.PatchEmptyOldString if old is empty;
// wserr.PatchNoChange if old equals new or the result equals content;
// wserr.PatchOldStringNotFound if old does not occur;
// wserr.PatchOldStringNotUnique if it occurs more than once and replaceAll
// is false (the message says how often).
func ApplyPatch(p Path, content []byte, old, new string, replaceAll bool) ([]byte, int, error) {
	const op = "patch"
	if !IsText(content) {
		return nil, 0, notTextPatch(p)
	}
	if err := checkPatch(p, old, new); err != nil {
		return nil, 0, err
	}
	n := bytes.Count(content, []byte(old))
	if err := checkMatches(p, n, replaceAll); err != nil {
		return nil, 0, err
	}
	limit := 1
	if replaceAll {
		limit = -1
	}
	out := bytes.Replace(content, []byte(old), []byte(new), limit)
	if bytes.Equal(out, content) {
		return nil, 0, wserr.New(wserr.PatchNoChange, op, p.String(), "the patch leaves the file unchanged")
	}
	if !replaceAll {
		n = 1
	}
	return out, n, nil
}

func notTextPatch(p Path) error {
	return wserr.New(wserr.NotText, "patch", p.String(),
		"file is not UTF-8 text and cannot be patched; write it whole instead")
}

// checkPatch checks a patch's strings as ApplyPatch does.
func checkPatch(p Path, old, new string) error {
	switch {
	case old == "":
		return wserr.New(wserr.PatchEmptyOldString, "patch", p.String(),
			"the text to replace (old) is empty; quote it, or write the file to add text")
	case old == new:
		return wserr.New(wserr.PatchNoChange, "patch", p.String(),
			"the text to replace (old) and its replacement (new) are the same; nothing to change")
	}
	return nil
}

// checkMatches checks that n occurrences of the text to replace may be
// replaced.
func checkMatches(p Path, n int, replaceAll bool) error {
	switch {
	case n == 0:
		return wserr.New(wserr.PatchOldStringNotFound, "patch", p.String(),
			"the text to replace (old) was not found; read the file again and quote it exactly, including whitespace and line endings")
	case n > 1 && !replaceAll:
		return wserr.New(wserr.PatchOldStringNotUnique, "patch", p.String(),
			"the text to replace (old) occurs %d times; add surrounding text to make it unique, or set replaceAll", n)
	}
	return nil
}
