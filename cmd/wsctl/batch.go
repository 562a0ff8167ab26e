package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/wserr"
)

// codeInterrupted is what a batch, or the request in flight, that an
// interrupt stopped fails with.
const codeInterrupted = protocol.CodeInterrupted

// maxBatchLine bounds one request line.
const maxBatchLine = 64 << 20

type batchOptions struct {
	globals
	in      io.Reader
	maxLine int
}

func newBatchCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "batch",
		Short: "Serve JSON-lines requests on stdin (the way in for hosts)",
		Long:  protocol.Help(),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := a.globals(cmd)
			if err != nil {
				return err
			}
			// A host that goes away would otherwise end the process by
			// SIGPIPE at the next response, before the store is closed;
			// noticed, the write fails and batch ends through its error.
			pipe := make(chan os.Signal, 1)
			signal.Notify(pipe, syscall.SIGPIPE)
			defer signal.Stop(pipe)
			return runBatch(cmd.Context(), batchOptions{globals: g, in: cmd.InOrStdin(), maxLine: maxBatchLine}, args)
		},
	}
}

// batchLine is one line read from the input.
type batchLine struct {
	data    []byte
	tooLong bool
	err     error // a read error other than EOF; ends the batch
}

func runBatch(ctx context.Context, o batchOptions, _ []string) error {
	defer softMemoryLimit(defaultMemoryLimit)()
	st, err := openServing(ctx, o.globals)
	if err != nil {
		return err
	}
	defer st.Close()
	b := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors, Retention: st.Runs,
		Records: st.Runs, Host: st.Runs, Checkpoints: st.Checkpoints, Store: st,
		Archives: stdioArchives{Archives: st, stdio: stdioFiles(o.in, o.out)}})

	growPipe(o.in)
	growPipe(o.out)
	// Lines are read on their own goroutine so that an interrupt ends the
	// batch even while it waits for input.
	lines := make(chan batchLine)
	done := make(chan struct{})
	defer close(done)
	go readLines(o.in, o.maxLine, lines, done)
	w := bufio.NewWriter(o.out)
	for {
		var l batchLine
		var ok bool
		select {
		case <-ctx.Done():
			return protocol.Interrupted("no more requests are read")
		case l, ok = <-lines:
		}
		if ctx.Err() != nil {
			// Both were ready: the interrupt wins over a line, which
			// stays unread, and over the end of the input.
			return protocol.Interrupted("no more requests are read")
		}
		if !ok {
			return nil
		}
		if l.err != nil {
			return fmt.Errorf("batch: read: %w", l.err)
		}
		var resp protocol.Response
		sent := false
		if l.tooLong {
			resp = protocol.LineTooLong(o.maxLine)
		} else {
			// A commit's response is written from its sink, before its
			// outcome is recorded (HandleTo).
			var err error
			resp, sent, err = b.HandleTo(ctx, l.data, func(r protocol.Response) error { return writeResponse(w, r) })
			var late *protocol.AfterDeliveryError
			switch {
			case errors.As(err, &late):
				fmt.Fprintf(o.errOut, "wsctl: batch: %v\n", err)
			case err != nil:
				return writeFailed(err)
			}
		}
		if !sent {
			if err := writeResponse(w, resp); err != nil {
				return writeFailed(err)
			}
		}
		if ctx.Err() != nil {
			// Checked before the next line: once input has ended, the
			// select below could take the closed channel over ctx.Done
			// and end the batch as if nothing had interrupted it.
			return protocol.Interrupted("no more requests are read")
		}
	}
}

// readLines sends every line of r (without its "\n" or "\r\n") to out and
// closes it at EOF. A line longer than max is drained and sent as tooLong.
// A final line without "\n" is still a line; an input that ends right
// after a "\n" has no extra empty line.
//
// A line is kept as the reader's fragments until it ends, then joined
// once: a slice grown by append would leave each smaller array it
// outgrew behind, several times the line in all. A line past max drops
// what it kept and its rest streams through the reader's buffer.
func readLines(r io.Reader, max int, out chan<- batchLine, done <-chan struct{}) {
	defer close(out)
	br := bufio.NewReaderSize(r, 64<<10)
	send := func(l batchLine) bool {
		select {
		case out <- l:
			return true
		case <-done:
			return false
		}
	}
	for {
		var frags [][]byte
		n := 0
		tooLong, got := false, false
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			got = got || len(frag) > 0
			if !tooLong {
				if n+len(frag) > max+2 { // +2: the line ending
					tooLong, frags = true, nil
				} else if len(frag) > 0 {
					frags, n = append(frags, bytes.Clone(frag)), n+len(frag)
				}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			send(batchLine{err: err})
			return
		}
		if !got {
			return // EOF right after the last line
		}
		if n-lineEnding(frags) > max { // a line within max+2 bytes, its ending not all of them
			tooLong, frags = true, nil
		}
		var buf []byte
		if len(frags) == 1 {
			buf = frags[0]
		} else if len(frags) > 1 {
			buf = bytes.Join(frags, nil)
		}
		frags = nil
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if !send(batchLine{data: buf, tooLong: tooLong}) || err != nil {
			return
		}
	}
}

// lineEnding returns the length of the "\n" or "\r\n" that ends the line
// held as frags, 0 for a final line without one.
func lineEnding(frags [][]byte) int {
	if len(frags) == 0 {
		return 0
	}
	last := frags[len(frags)-1]
	if !bytes.HasSuffix(last, []byte("\n")) {
		return 0
	}
	before := last[:len(last)-1]
	if len(before) == 0 && len(frags) > 1 {
		before = frags[len(frags)-2]
	}
	if bytes.HasSuffix(before, []byte("\r")) {
		return 2
	}
	return 1
}

// writeFailed is batch's error for a response it could not write: a
// hostGoneError when the host closed its end of the output.
func writeFailed(err error) error {
	err = fmt.Errorf("batch: write: %w", err)
	if pipeClosed(err) {
		return hostGoneError{err}
	}
	return err
}

// writeResponse writes one line and flushes it: the host may be waiting for
// it before it sends the next request.
func writeResponse(w *bufio.Writer, resp protocol.Response) error {
	if err := protocol.WriteResponse(w, resp); err != nil {
		return err
	}
	return w.Flush()
}

// stdioFile is one of batch's standard streams, as a file it may be
// named by.
type stdioFile struct {
	name string // "input" or "output"
	fi   os.FileInfo
}

// stdioFiles describes in and out, those of them that are files.
func stdioFiles(in io.Reader, out io.Writer) []stdioFile {
	var fs []stdioFile
	for _, s := range []struct {
		name string
		v    any
	}{{"input", in}, {"output", out}} {
		if f, ok := s.v.(*os.File); ok {
			if fi, err := f.Stat(); err == nil {
				fs = append(fs, stdioFile{s.name, fi})
			}
		}
	}
	return fs
}

// stdioArchives is the store's export and import for batch. An archive
// file that is batch's own standard input or output (/dev/stdout,
// /proc/self/fd/0, the file the output is redirected to) is refused with
// workspace.invalid_argument before anything is read or written: an export
// would write the archive into the response lines (or replace the file
// they go to), an import would read the requests that follow as the
// archive.
type stdioArchives struct {
	protocol.Archives
	stdio []stdioFile
}

func (a stdioArchives) ExportFile(ctx context.Context, path string, scope archive.Scope, opt archive.Options) (archive.Summary, error) {
	if err := a.refuseStdio("export", path); err != nil {
		return archive.Summary{}, err
	}
	return a.Archives.ExportFile(ctx, path, scope, opt)
}

func (a stdioArchives) ImportFile(ctx context.Context, path string, opt archive.Options) (archive.Summary, error) {
	if err := a.refuseStdio("import", path); err != nil {
		return archive.Summary{}, err
	}
	return a.Archives.ImportFile(ctx, path, opt)
}

// refuseStdio fails when path (its links followed) is one of a.stdio. A
// path that cannot be read is left to the store to report.
func (a stdioArchives) refuseStdio(op, path string) error {
	if len(a.stdio) == 0 || path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	for _, s := range a.stdio {
		if os.SameFile(fi, s.fi) {
			return wserr.New(wserr.InvalidArgument, op, path, "that is batch's standard %s, which carries the %s: name another file", s.name, map[string]string{"input": "requests", "output": "responses"}[s.name])
		}
	}
	return nil
}

// pipeSize is the capacity batch asks for its input and output pipes
// (growPipe): room for a request of a few large files, or a large read's
// response, in one write.
const pipeSize = 1 << 20
