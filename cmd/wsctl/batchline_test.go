package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var hugeLine = flag.Bool("wsctl.hugeline", false, "decode a 63 MiB batch line of about 7 M keys instead of 8 MiB")

// manyKeysLine returns a request line of about size bytes whose one
// object holds as many distinct keys as fit, each `"xxxx":0`.
func manyKeysLine(size int) (string, int) {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	var b bytes.Buffer
	b.Grow(size + 64)
	b.WriteString(`{"op":"stat","runId":"run_a","path":"output/a.md","x":{`)
	n := 0
	for b.Len() < size-16 {
		if n > 0 {
			b.WriteByte(',')
		}
		k := n
		b.WriteByte('"')
		for range 4 {
			b.WriteByte(digits[k%62])
			k /= 62
		}
		b.WriteString(`":0`)
		n++
	}
	b.WriteString("}}\n")
	return b.String(), n
}

// TestBatchLineMemory: a line of millions of keys is answered (with an
// error line: the request does not fit its op) by a wsctl whose peak RSS
// grows with the line by a small constant.
func TestBatchLineMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wsctl as a child")
	}
	size := 8 << 20
	if *hugeLine {
		size = 63 << 20
	}
	c := seededStore(t)
	line, keys := manyKeysLine(size)
	r := childRun(t, c.store, line, nil, "batch")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, 1, strings.Count(string(r.out), "\n"))
	assert.Contains(t, string(r.out), `"ok":false`)
	t.Logf("a %d MiB line of %d keys: peak RSS %.1f MiB; answer %.200s", len(line)>>20, keys, float64(r.hwm)/(1<<20), r.out)
}

// TestBatchOverlongLineMemory: a line past the limit is answered
// batch.line_too_long, the batch goes on, and wsctl holds no more of the
// line than the limit (64 MiB) while it reads it: a reader that grew one
// slice by append for it reached over 150 MiB.
func TestBatchOverlongLineMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wsctl as a child on a 65 MiB line")
	}
	c := seededStore(t)
	in := `{"op":"stat","runId":"run_a","path":"output/a.md","x":"` + strings.Repeat("a", maxBatchLine+1<<20) + "\"}\n" +
		`{"op":"stat","runId":"run_a","path":"output/a.md"}` + "\n"
	r := childRun(t, c.store, in, nil, "batch")
	require.Equal(t, 0, r.code, r.err)
	rs := decodeResponses(t, string(r.out))
	require.Len(t, rs, 2)
	assert.Equal(t, "batch.line_too_long", rs[0].code())
	assert.True(t, rs[1].OK, "the next line is answered")
	t.Logf("a %d MiB line past the limit: peak RSS %.1f MiB", len(in)>>20, float64(r.hwm)/(1<<20))
	assert.Less(t, r.hwm, int64(128<<20), "peak RSS")
}
