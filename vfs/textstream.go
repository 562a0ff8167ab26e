package vfs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/wsstore/wsstore/wserr"
)

// textPrefixLen is how much of a large file ReadRangeFrom looks at to decide
// whether it is text before it reads a range of it.
const textPrefixLen = 64 << 10

// MaxReadBytes is the most content one read of a file returns (the
// limit the store's reads give ReadRangeFrom): a larger file is read by
// line or char range, or streamed whole where the store can.
const MaxReadBytes = 16 << 20

// ReadRangeFrom is ReadRange for content streamed from r, size bytes long,
// holding at most limit bytes of it in memory. Content of at most limit
// bytes is read whole and handed to ReadRange, with its results and
// errors. Larger content is never read whole:
//
//   - without a range it is refused with wserr.SizeLimitExceeded (the
//     message says to ask for a line range or to stream the file);
//   - whether it is text is decided from its first 64 KiB
//     (wserr.NotText otherwise), and the range returned must itself be
//     text;
//   - r is read only up to the end of the range, so TotalLines is known
//     (and TotalLinesUnknown false) only if the range reaches the end;
//   - a range holding more than limit bytes returns the whole lines (or the
//     chars) that fit, with Truncated set and EndLine the last line
//     returned; a first line longer than limit is refused with
//     wserr.SizeLimitExceeded.
//
// Range errors are those of ReadRange; a startLine past the end names the
// file's line count, which is then known.
func ReadRangeFrom(p Path, r io.Reader, size int64, opt ReadOptions, limit int) (ReadResult, error) {
	const op = "read"
	if size <= int64(limit) {
		b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
		if err != nil {
			return ReadResult{}, err
		}
		if len(b) > limit {
			return ReadResult{}, grewWhileRead(op, p)
		}
		return ReadRange(p, b, opt)
	}
	lineRange, charRange := opt.ranges()
	switch {
	case lineRange && charRange:
		return ReadResult{}, wserr.New(wserr.InvalidArgument, op, p.String(),
			"give either a line range or a char range, not both")
	case !lineRange && !charRange:
		return ReadResult{}, wserr.New(wserr.SizeLimitExceeded, op, p.String(),
			"the file is %d bytes, more than a read returns (%d); read a line range of it, or stream it whole (wsctl cat)", size, limit)
	}
	br := bufio.NewReaderSize(r, textPrefixLen)
	prefix, err := br.Peek(textPrefixLen)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return ReadResult{}, err
	}
	if !textPrefix(prefix) {
		return ReadResult{}, wserr.New(wserr.NotText, op, p.String(),
			"file is not UTF-8 text, so it has no lines or chars to select, and at %d bytes it is more than a read returns (%d); stream it whole (wsctl cat)", size, limit)
	}
	var res ReadResult
	if lineRange {
		res, err = streamLines(p, br, opt.StartLine, opt.EndLine, limit)
	} else {
		res, err = streamChars(p, br, opt.StartChar, opt.EndChar, limit)
	}
	if err != nil {
		return ReadResult{}, err
	}
	if !IsText(res.Content) {
		return ReadResult{}, wserr.New(wserr.NotText, op, p.String(),
			"the range asked for is not UTF-8 text; read it whole")
	}
	res.Text = string(res.Content)
	return res, nil
}

// textPrefix reports whether b, the start of a file, is text up to an
// incomplete last rune.
func textPrefix(b []byte) bool {
	var c textCheck
	c.Write(b)
	return !c.bad
}

// streamLines reads lines start..end (as readLines counts them) from br.
func streamLines(p Path, br *bufio.Reader, start, end, limit int) (ReadResult, error) {
	bad := func(total int, format string, args ...any) (ReadResult, error) {
		if total >= 0 {
			format += fmt.Sprintf(" (the file has %s)", countNoun(total, "line"))
		}
		return ReadResult{}, wserr.New(wserr.InvalidLineRange, "read", p.String(), format, args...)
	}
	if start == 0 {
		start = 1
	}
	switch {
	case start < 0:
		return bad(-1, "startLine %d is negative; lines count from 1", start)
	case end < 0:
		return bad(-1, "endLine %d is negative; use 0 to read to the end", end)
	case end != 0 && end < start:
		return bad(-1, "endLine %d is before startLine %d", end, start)
	}
	var out []byte
	over := false // the next line did not fit in limit
	// next reads one line, keeping it in out if keep; ok is false at the
	// end of the content.
	next := func(keep bool) (ok bool, err error) {
		mark, got := len(out), 0
		for {
			frag, err := br.ReadSlice('\n')
			got += len(frag)
			if keep {
				if len(out)+len(frag) > limit {
					out, over = out[:mark], true
					return true, nil
				}
				out = append(out, frag...)
			}
			switch err {
			case bufio.ErrBufferFull:
				continue
			case io.EOF:
				return got > 0, nil
			case nil:
				return true, nil
			}
			return false, err
		}
	}
	line := 0 // lines read so far
	for line+1 < start {
		ok, err := next(false)
		if err != nil {
			return ReadResult{}, err
		}
		if !ok {
			return bad(line, "startLine %d is past the last line", start)
		}
		line++
	}
	atEnd := false
	for end == 0 || line < end {
		ok, err := next(true)
		if err != nil {
			return ReadResult{}, err
		}
		if over {
			break
		}
		if !ok {
			atEnd = true
			break
		}
		line++
	}
	if line < start {
		if over {
			return ReadResult{}, wserr.New(wserr.SizeLimitExceeded, "read", p.String(),
				"line %d alone is more than a read returns (%d bytes); stream the file whole (wsctl cat)", start, limit)
		}
		return bad(line, "startLine %d is past the last line", start)
	}
	if !atEnd && !over {
		_, err := br.Peek(1)
		atEnd = err == io.EOF
	}
	res := ReadResult{Content: out, StartLine: start, EndLine: line, Truncated: true}
	if atEnd && !over {
		res.TotalLines = line
		res.Truncated = start > 1
	} else {
		res.TotalLinesUnknown = true
	}
	return res, nil
}

// streamChars reads chars start..end (as readChars counts them) from br.
func streamChars(p Path, br *bufio.Reader, start, end, limit int) (ReadResult, error) {
	bad := func(format string, args ...any) (ReadResult, error) {
		return ReadResult{}, wserr.New(wserr.InvalidCharRange, "read", p.String(), format, args...)
	}
	switch {
	case start < 0:
		return bad("startChar %d is negative; chars count from 0", start)
	case end < 0:
		return bad("endChar %d is negative; use 0 to read to the end", end)
	case end != 0 && end < start:
		return bad("endChar %d is before startChar %d", end, start)
	}
	notText := wserr.New(wserr.NotText, "read", p.String(), "file is not UTF-8 text; read it whole")
	for at := 0; at < start; at++ {
		r, size, err := br.ReadRune()
		if err == io.EOF {
			return bad("startChar %d is past the end (the file has %s)", start, countNoun(at, "char"))
		}
		if err != nil {
			return ReadResult{}, err
		}
		if r == 0 || (r == utf8.RuneError && size == 1) {
			return ReadResult{}, notText
		}
	}
	var out []byte
	res := ReadResult{Truncated: true, TotalLinesUnknown: true}
	for at := start; end == 0 || at < end; at++ {
		r, size, err := br.ReadRune()
		if err == io.EOF {
			res.Truncated = start > 0
			break
		}
		if err != nil {
			return ReadResult{}, err
		}
		if r == 0 || (r == utf8.RuneError && size == 1) {
			return ReadResult{}, notText
		}
		if len(out)+size > limit {
			break
		}
		out = utf8.AppendRune(out, r)
	}
	res.Content = out
	return res, nil
}

// textCheck tells, as bytes are written to it in any pieces, whether the
// whole is text as IsText says, in constant memory.
type textCheck struct {
	pend []byte // an incomplete rune at the end of the last write
	buf  []byte
	bad  bool
}

// Write takes the next bytes; it never fails.
func (c *textCheck) Write(p []byte) (int, error) {
	if c.bad {
		return len(p), nil
	}
	if bytes.IndexByte(p, 0) >= 0 {
		c.bad = true
		return len(p), nil
	}
	b := p
	if len(c.pend) > 0 {
		c.buf = append(append(c.buf[:0], c.pend...), p...)
		b = c.buf
	}
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	if !utf8.Valid(b[:cut]) {
		c.bad = true
		return len(p), nil
	}
	c.pend = append(c.pend[:0], b[cut:]...)
	return len(p), nil
}

// Text reports whether everything written is text.
func (c *textCheck) Text() bool { return !c.bad && len(c.pend) == 0 }

// CheckPatch checks a patch of the content r streams as ApplyPatch checks
// it, reading r once and holding none of it, and returns the number of
// replacements ApplyPatch would make; the patched content is then
// ReplaceReader over the same content. It fails with ApplyPatch's errors.
func CheckPatch(p Path, r io.Reader, old, new string, replaceAll bool) (int, error) {
	n, _, err := CheckPatchFrom(p, r, old, new, replaceAll)
	return n, err
}

// CheckPatchFrom is CheckPatch, also returning the offset of the first
// replacement: the patched content's bytes before it are the content's.
func CheckPatchFrom(p Path, r io.Reader, old, new string, replaceAll bool) (n int, first int64, err error) {
	if err := checkPatch(p, old, new); err != nil {
		return 0, 0, err
	}
	n, first, text, err := countMatches(r, []byte(old))
	if err != nil {
		return 0, 0, err
	}
	if !text {
		return 0, 0, notTextPatch(p)
	}
	if err := checkMatches(p, n, replaceAll); err != nil {
		return 0, 0, err
	}
	return n, first, nil
}

// countMatches streams r and returns how often old occurs in it, counted
// as bytes.Count counts (without overlaps, from the left), the offset of
// the first occurrence (-1: none), and whether the whole is text (IsText),
// in memory of a buffer and len(old). old must not be empty.
func countMatches(r io.Reader, old []byte) (n int, first int64, text bool, err error) {
	var c textCheck
	var off int64
	first = -1
	sc := newMatchScanner(io.TeeReader(r, &c), old)
	for !sc.eof {
		if err := sc.step(func(seg []byte, match bool) {
			if match {
				if n == 0 {
					first = off
				}
				n++
			}
			off += int64(len(seg))
		}); err != nil {
			return 0, 0, false, err
		}
	}
	return n, first, c.Text(), nil
}

// ReplaceReader returns a reader of r's content with every occurrence of
// old (as countMatches counts them) replaced by new, holding a buffer and
// len(old) bytes whatever r's length. old must not be empty.
func ReplaceReader(r io.Reader, old, new []byte) io.Reader {
	return &replacer{sc: newMatchScanner(r, old), new: new}
}

type replacer struct {
	sc   *matchScanner
	new  []byte
	segs [][]byte // output not yet read, in the scanner's buffer or new
	err  error
}

func (x *replacer) Read(p []byte) (int, error) {
	for len(x.segs) == 0 {
		if x.err != nil {
			return 0, x.err
		}
		if x.sc.eof {
			x.err = io.EOF
			continue
		}
		x.segs = x.segs[:0]
		x.err = x.sc.step(func(seg []byte, match bool) {
			if match {
				seg = x.new
			}
			if len(seg) > 0 {
				x.segs = append(x.segs, seg)
			}
		})
	}
	n := 0
	for n < len(p) && len(x.segs) > 0 {
		c := copy(p[n:], x.segs[0])
		n += c
		if x.segs[0] = x.segs[0][c:]; len(x.segs[0]) == 0 {
			x.segs = x.segs[1:]
		}
	}
	return n, nil
}

// matchScanner splits a stream into the runs of bytes between the
// occurrences of old and the occurrences, one read at a time.
type matchScanner struct {
	r    io.Reader
	old  []byte
	buf  []byte
	tail []byte // the end of buf the next step starts from
	eof  bool
}

func newMatchScanner(r io.Reader, old []byte) *matchScanner {
	return &matchScanner{r: r, old: old, buf: make([]byte, 0, max(textPrefixLen, 2*len(old)))}
}

// step reads once more and hands fn, in order, the plain runs (match
// false) and occurrences (match true) that read settles; the slices are
// valid until the next step.
func (sc *matchScanner) step(fn func(seg []byte, match bool)) error {
	// What the last step kept (a possible start of an occurrence) moves
	// to the front; the slices handed out before are no longer read.
	sc.buf = append(sc.buf[:0], sc.tail...)
	n, err := io.ReadAtLeast(sc.r, sc.buf[len(sc.buf):cap(sc.buf)], 1)
	sc.buf = sc.buf[:len(sc.buf)+n]
	switch err {
	case nil:
	case io.EOF:
		sc.eof = true
	default:
		return err
	}
	rest := sc.buf
	for {
		i := bytes.Index(rest, sc.old)
		if i < 0 {
			break
		}
		if i > 0 {
			fn(rest[:i], false)
		}
		fn(sc.old, true)
		rest = rest[i+len(sc.old):]
	}
	keep := 0
	if !sc.eof {
		keep = min(len(rest), len(sc.old)-1)
	}
	if len(rest) > keep {
		fn(rest[:len(rest)-keep], false)
	}
	sc.tail = rest[len(rest)-keep:]
	return nil
}

// grewWhileRead is the error of a read whose source grew past the size it
// was read at (a host file another program writes): store.conflict, read
// it again.
func grewWhileRead(op string, p Path) error {
	return wserr.New(wserr.Conflict, op, p.String(), "the file changed while it was read; read it again")
}
