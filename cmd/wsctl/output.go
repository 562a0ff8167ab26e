package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/wsstore/wsstore/vfs"
)

// writeJSON prints v as indented JSON, keeping "<", ">" and "&" readable.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints aligned columns.
type table struct {
	w   io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// row adds one row; cells are made single-line so the columns stay
// aligned.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// flush writes the table without the padding tabwriter leaves after a
// last empty cell.
func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var out bytes.Buffer
	for line := range strings.Lines(t.buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	t.buf.Reset()
	_, err := t.w.Write(out.Bytes())
	return err
}

// cell escapes what a terminal would act on or hide: control characters
// (tabs and newlines would break the columns), format characters such as
// bidi overrides (they reorder the text after them on screen) and bytes
// that are not UTF-8 (\xff), the way Go quotes them.
func cell(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// humanBytes formats n bytes as 512 B, 1.5 KiB, 3.2 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit && f > -unit {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return fmt.Sprintf("%.1f PiB", f/unit)
}

// stamp formats a time for tables: local, to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// clock formats an event time for timelines.
func clock(t time.Time) string { return t.Local().Format("15:04:05.000") }

// ellipsize cuts s to at most n runes.
func ellipsize(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// pages prints a listing read a page at a time, holding one page: with
// --json one array, as writeJSON would print the whole listing; else a
// table whose header comes once and whose columns are aligned within
// each page. A listing that fails part way is ended with abort.
type pages[T any] struct {
	w      io.Writer
	json   bool
	header []string
	row    func(T) []string
	n      int  // entries printed
	open   bool // a JSON array begun and not ended
}

// all prints every page read gives, asking each time for the page after
// the last entry's path (pathOf).
func (p *pages[T]) all(read func(page vfs.ListPage) ([]T, bool, error), pathOf func(T) vfs.Path) error {
	page := vfs.ListPage{Limit: vfs.DefaultListLimit}
	for {
		xs, more, err := read(page)
		if err != nil {
			return err
		}
		if err := p.add(xs); err != nil {
			return err
		}
		if !more {
			return p.close()
		}
		page.After = pathOf(xs[len(xs)-1])
	}
}

// add prints one page.
func (p *pages[T]) add(xs []T) error {
	if p.json {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("  ", "  ")
		for _, x := range xs {
			if p.n == 0 {
				buf.WriteString("[\n  ")
			} else {
				buf.WriteString(",\n  ")
			}
			if err := enc.Encode(x); err != nil {
				return err
			}
			buf.Truncate(buf.Len() - 1) // Encode's newline
			p.n++
		}
		_, err := p.w.Write(buf.Bytes())
		p.open = p.n > 0 // the array's "[" went out with its first page
		return err
	}
	var t *table
	if p.n == 0 {
		t = newTable(p.w, p.header...)
	} else {
		t = newTable(p.w)
	}
	for _, x := range xs {
		t.row(p.row(x)...)
		p.n++
	}
	if p.n == 0 {
		return nil // the header waits for close
	}
	return t.flush()
}

// close ends the listing.
func (p *pages[T]) close() error {
	switch {
	case p.json && p.n == 0:
		_, err := io.WriteString(p.w, "[]\n")
		return err
	case p.json:
		p.open = false
		_, err := io.WriteString(p.w, "\n]\n")
		return err
	case p.n == 0:
		return newTable(p.w, p.header...).flush()
	}
	return nil
}

// abort ends a JSON array that a listing which failed part way had begun,
// after its last whole entry, so that standard output holds one JSON
// document (the error and the exit status say it is cut short); a
// listing that printed nothing prints nothing. After close, or in a
// table, it does nothing: the rows printed stay printed. The commands
// defer it.
func (p *pages[T]) abort() {
	if p.open {
		p.open = false
		_, _ = io.WriteString(p.w, "\n]\n")
	}
}
