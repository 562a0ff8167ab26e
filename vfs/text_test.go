package vfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/wserr"
)

func TestIsText(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want bool
	}{
		{"OKEmpty", nil, true},
		{"OKASCII", []byte("hello\n"), true},
		{"OKCJK", []byte("世界书\n"), true},
		{"NotTextNUL", []byte("a\x00b"), false},
		{"NotTextInvalidUTF8", []byte{'a', 0xff}, false},
		{"NotTextCutRune", []byte("世")[:2], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, IsText(tt.in))
		})
	}
}

// textErr checks that err is a *wserr.Error with code, op and path.
func textErr(t *testing.T, err error, code wserr.Code, op, path string) *wserr.Error {
	t.Helper()
	require.Error(t, err)
	var e *wserr.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, code, e.Code, "error: %v", err)
	assert.Equal(t, op, e.Op)
	assert.Equal(t, path, e.Path)
	return e
}

func TestReadRange(t *testing.T) {
	p := MustPath("notes/a.md")
	const three = "one\ntwo\nthree\n"
	tests := []struct {
		name      string
		content   string
		opt       ReadOptions
		text      string
		start     int
		end       int
		total     int
		truncated bool
	}{
		{"OKWhole", three, ReadOptions{}, three, 0, 0, 3, false},
		{"OKWholeNoTrailingNewline", "one\ntwo", ReadOptions{}, "one\ntwo", 0, 0, 2, false},
		{"OKWholeEmpty", "", ReadOptions{}, "", 0, 0, 0, false},
		{"OKOnlyNewline", "\n", ReadOptions{StartLine: 1}, "\n", 1, 1, 1, false},
		{"OKFirstLine", three, ReadOptions{StartLine: 1, EndLine: 1}, "one\n", 1, 1, 3, true},
		{"OKMiddleLine", three, ReadOptions{StartLine: 2, EndLine: 2}, "two\n", 2, 2, 3, true},
		{"OKLastLineNoNewline", "one\ntwo", ReadOptions{StartLine: 2}, "two", 2, 2, 2, true},
		{"OKToEnd", three, ReadOptions{StartLine: 2}, "two\nthree\n", 2, 3, 3, true},
		{"OKStartZeroMeansOne", three, ReadOptions{EndLine: 2}, "one\ntwo\n", 1, 2, 3, true},
		{"OKEndClamped", three, ReadOptions{StartLine: 1, EndLine: 99}, three, 1, 3, 3, false},
		{"OKKeepsCRLF", "a\r\nb\r\n", ReadOptions{StartLine: 1, EndLine: 1}, "a\r\n", 1, 1, 2, true},
		{"OKBlankLines", "a\n\n\nb\n", ReadOptions{StartLine: 2, EndLine: 3}, "\n\n", 2, 3, 4, true},
		{"OKEmptyFileFromLineOne", "", ReadOptions{StartLine: 1}, "", 1, 0, 0, false},
		{"OKChars", "héllo 世界", ReadOptions{StartChar: 1, EndChar: 5}, "éllo", 0, 0, 1, true},
		{"OKCharsToEnd", "héllo 世界", ReadOptions{StartChar: 6}, "世界", 0, 0, 1, true},
		{"OKCharsEndClamped", "世界", ReadOptions{StartChar: 0, EndChar: 9}, "世界", 0, 0, 1, false},
		{"OKCharsAtEnd", "世界", ReadOptions{StartChar: 2}, "", 0, 0, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := ReadRange(p, []byte(tt.content), tt.opt)
			require.NoError(t, err)
			assert.Equal(t, tt.text, res.Text)
			assert.Equal(t, tt.text, string(res.Content))
			assert.Equal(t, tt.start, res.StartLine, "startLine")
			assert.Equal(t, tt.end, res.EndLine, "endLine")
			assert.Equal(t, tt.total, res.TotalLines, "totalLines")
			assert.Equal(t, tt.truncated, res.Truncated, "truncated")
			assert.Zero(t, res.Info, "ReadRange leaves Info to the caller")
		})
	}

	t.Run("OKBinaryWhole", func(t *testing.T) {
		bin := []byte{0, 1, 2}
		res, err := ReadRange(p, bin, ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, bin, res.Content)
		assert.Empty(t, res.Text)
		assert.Zero(t, res.TotalLines)
	})

	errTests := []struct {
		name    string
		content string
		opt     ReadOptions
		code    wserr.Code
		msg     string // part of the message
	}{
		{"ErrBothRanges", three, ReadOptions{StartLine: 1, EndChar: 2}, wserr.InvalidArgument, "not both"},
		{"ErrStartLinePastEnd", three, ReadOptions{StartLine: 4}, wserr.InvalidLineRange, "the file has 3 lines"},
		{"ErrStartLinePastEmpty", "", ReadOptions{StartLine: 2}, wserr.InvalidLineRange, "the file has 0 lines"},
		{"ErrStartLineNegative", three, ReadOptions{StartLine: -1}, wserr.InvalidLineRange, "negative"},
		{"ErrEndLineNegative", three, ReadOptions{StartLine: 1, EndLine: -2}, wserr.InvalidLineRange, "negative"},
		{"ErrEndBeforeStart", "x\n", ReadOptions{StartLine: 3, EndLine: 2}, wserr.InvalidLineRange, "the file has 1 line)"},
		{"ErrStartCharPastEnd", "世界", ReadOptions{StartChar: 3}, wserr.InvalidCharRange, "the file has 2 chars"},
		{"ErrStartCharNegative", "abc", ReadOptions{StartChar: -1}, wserr.InvalidCharRange, "negative"},
		{"ErrEndCharNegative", "abc", ReadOptions{EndChar: -1}, wserr.InvalidCharRange, "negative"},
		{"ErrEndCharBeforeStart", "abc", ReadOptions{StartChar: 2, EndChar: 1}, wserr.InvalidCharRange, "before"},
		{"ErrNotTextLines", "a\x00b", ReadOptions{StartLine: 1}, wserr.NotText, "not UTF-8 text"},
		{"ErrNotTextChars", "a\xffb", ReadOptions{StartChar: 1}, wserr.NotText, "not UTF-8 text"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadRange(p, []byte(tt.content), tt.opt)
			e := textErr(t, err, tt.code, "read", "notes/a.md")
			assert.Contains(t, e.Msg, tt.msg)
		})
	}
}

func TestApplyPatch(t *testing.T) {
	p := MustPath("output/main.md")
	tests := []struct {
		name       string
		content    string
		old, new   string
		replaceAll bool
		want       string
		n          int
	}{
		{"OKUnique", "hello world", "world", "there", false, "hello there", 1},
		{"OKDelete", "a\nb\nc\n", "b\n", "", false, "a\nc\n", 1},
		{"OKReplaceAll", "x y x y x", "x", "z", true, "z y z y z", 3},
		{"OKReplaceAllSingle", "x y", "x", "z", true, "z y", 1},
		{"OKMultiline", "func a() {\n\treturn 1\n}\n", "\treturn 1\n", "\treturn 2\n", false, "func a() {\n\treturn 2\n}\n", 1},
		{"OKCJK", "第一章：开始。", "开始", "结束", false, "第一章：结束。", 1},
		{"OKGrowsAroundOld", "ab", "a", "aa", false, "aab", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content := []byte(tt.content)
			out, n, err := ApplyPatch(p, content, tt.old, tt.new, tt.replaceAll)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(out))
			assert.Equal(t, tt.n, n)
			assert.Equal(t, tt.content, string(content), "the input is not modified")
		})
	}

	errTests := []struct {
		name       string
		content    string
		old, new   string
		replaceAll bool
		code       wserr.Code
		msg        string
	}{
		{"ErrPatchEmptyOldString", "abc", "", "x", false, wserr.PatchEmptyOldString, "empty"},
		{"ErrPatchOldStringNotFound", "abc", "abd", "x", false, wserr.PatchOldStringNotFound, "not found"},
		{"ErrPatchOldStringNotUnique", "a-a-a", "a", "b", false, wserr.PatchOldStringNotUnique, "occurs 3 times"},
		{"ErrPatchNoChange", "abc", "b", "b", false, wserr.PatchNoChange, "same"},
		{"ErrPatchNoChangeReplaceAll", "abab", "ab", "ab", true, wserr.PatchNoChange, "same"},
		{"ErrNotText", "a\x00b", "a", "c", false, wserr.NotText, "not UTF-8 text"},
		{"ErrNotTextInvalidUTF8", "a\xff", "a", "c", false, wserr.NotText, "not UTF-8 text"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			out, n, err := ApplyPatch(p, []byte(tt.content), tt.old, tt.new, tt.replaceAll)
			e := textErr(t, err, tt.code, "patch", "output/main.md")
			assert.Contains(t, e.Msg, tt.msg)
			assert.True(t, e.Code.ModelCorrectable(), "a patch mistake is the model's to fix")
			assert.Nil(t, out)
			assert.Zero(t, n)
		})
	}
}
