package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// echoEnv makes the test binary, run again as a child, answer each line
// of its input with a short line, as `wsctl batch` answers a request,
// after working on it for the duration the variable holds and doing
// nothing else.
const echoEnv = "WSBENCH_ECHO"

func TestMain(m *testing.M) {
	if v := os.Getenv(echoEnv); v != "" {
		work, err := time.ParseDuration(v)
		if err != nil {
			os.Exit(2)
		}
		echoLines(os.Stdin, os.Stdout, work)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// spin keeps the calling goroutine busy for d.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// echoLines answers every line of r with a line of 200 bytes, the size of
// a write's response, after working on it for work.
func echoLines(r io.Reader, w io.Writer, work time.Duration) {
	br, bw := bufio.NewReaderSize(r, 64<<10), bufio.NewWriter(w)
	answer := append(bytes.Repeat([]byte("x"), 199), '\n')
	for {
		if _, err := br.ReadSlice('\n'); err != nil && err != bufio.ErrBufferFull {
			return
		}
		spin(work)
		bw.Write(answer)
		if bw.Flush() != nil {
			return
		}
	}
}

// BenchmarkPipeRoundTrip measures what the batch transport costs beside
// the store's work: a request line of 4 KB sent down a pipe to a child
// process that answers it with a short line, as a host drives `wsctl
// batch`, answered before the next is sent. Three cases: sent back to
// back to a child that answers at once; with the host busy for half a
// millisecond between requests (as a session's host is, making the next
// one), so that the child's threads have gone to sleep; and to a child
// that works half a millisecond on each (about what a write costs the
// store), so that the host's have. The p50 of a case less the child's
// work is the transport's share of a request's round trip in that
// situation.
func BenchmarkPipeRoundTrip(b *testing.B) {
	const half = 500 * time.Microsecond
	for _, c := range []struct {
		name      string
		gap, work time.Duration
	}{{"back-to-back", 0, 0}, {"host-busy-0.5ms", half, 0}, {"child-works-0.5ms", 0, half}} {
		b.Run(c.name, func(b *testing.B) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), echoEnv+"="+c.work.String())
			in, err := cmd.StdinPipe()
			if err != nil {
				b.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer cmd.Wait()
			defer in.Close()
			br := bufio.NewReader(out)
			line := append(bytes.Repeat([]byte("a"), 4<<10), '\n')
			var took []time.Duration
			for b.Loop() {
				spin(c.gap) // the host at work
				start := time.Now()
				if _, err := in.Write(line); err != nil {
					b.Fatal(err)
				}
				if _, err := br.ReadSlice('\n'); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start)-c.work)
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}
