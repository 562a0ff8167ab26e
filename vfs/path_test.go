package vfs

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/wserr"
)

// requireInvalidPath checks that err is a wserr.InvalidPath *wserr.Error
// under op whose message contains msg, and returns it.
func requireInvalidPath(t *testing.T, err error, op, msg string) *wserr.Error {
	t.Helper()
	require.Error(t, err)
	var we *wserr.Error
	require.True(t, errors.As(err, &we), "error %v (%T) is not a *wserr.Error", err, err)
	assert.Equal(t, wserr.InvalidPath, we.Code)
	assert.Equal(t, op, we.Op)
	assert.Contains(t, we.Msg, msg)
	return we
}

func TestParsePath(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	// maxPath is exactly MaxPathLen bytes: 16 segments of 254 bytes, each
	// with its slash, then 16 bytes more.
	maxPath := strings.Repeat(long(254)+"/", 16) + long(MaxPathLen-16*255)

	ok := []struct {
		name, in, want string
	}{
		{"output_main", "output/main.md", "output/main.md"},
		{"single_segment", "README.md", "README.md"},
		{"deep", "a/b/c/d/e.txt", "a/b/c/d/e.txt"},
		{"double_slash", "output//main.md", "output/main.md"},
		{"many_slashes", "a///b////c", "a/b/c"},
		{"leading_dot_slash", "./output/x", "output/x"},
		{"repeated_dot_slash", "././output/./x/.", "output/x"},
		{"trailing_slash", "output/", "output"},
		{"trailing_slashes", "output///", "output"},
		{"dot_slash_then_dir", "./a/", "a"},
		{"hidden_file", ".env", ".env"},
		{"dot_dot_prefix_name", "..foo/bar..x", "..foo/bar..x"},
		{"device_name_inside_word", "console/nullable/com10/lpt.txt", "console/nullable/com10/lpt.txt"},
		{"leading_space", " x/y", " x/y"},
		{"nfc_unicode", "r\u00e9sum\u00e9.md", "r\u00e9sum\u00e9.md"},
		{"dots_in_name", "a/b..c", "a/b..c"},
		{"spaces", "my docs/a b.txt", "my docs/a b.txt"},
		{"unicode", "données/résumé.md", "données/résumé.md"},
		{"emoji", "notes/🚀.md", "notes/🚀.md"},
		{"c1_control_allowed", "a\u0085b", "a\u0085b"},
		{"tab_free_punctuation", "a-b_c+d=e(f)[g]{h}~!@#$%^&*,;'\"", "a-b_c+d=e(f)[g]{h}~!@#$%^&*,;'\""},
		{"segment_at_limit", long(MaxSegmentLen), long(MaxSegmentLen)},
		{"path_at_limit", maxPath, maxPath},
	}
	for _, tc := range ok {
		t.Run("OK/"+tc.name, func(t *testing.T) {
			p, err := ParsePath(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, p.String())
			assert.False(t, p.IsRoot())
			// Parsing the clean form gives the same value back.
			q, err := ParsePath(p.String())
			require.NoError(t, err)
			assert.Equal(t, p, q)
		})
	}

	errs := []struct {
		name, in, msg string
	}{
		// The seed's forbidden examples.
		{"ErrDotDot/parent_secrets", "../secrets.json", "'..' segment"},
		{"ErrAbsolute/users", "/Users/me/file", "absolute"},
		{"ErrDrive/windows_backslashes", `C:\Users\me\file`, `drive prefix "C:"`},
		{"ErrDotDot/escape_from_output", "output/../../chat.jsonl", "'..' segment"},
		{"ErrNUL/scratch", "scratch/\x00bad", "NUL"},
		{"ErrEmpty/empty", "", "empty"},

		// Names other platforms treat specially.
		{"ErrDevice/con", "CON", "device name"},
		{"ErrDevice/nul", "NUL", "device name"},
		{"ErrDevice/com1", "COM1", "device name"},
		{"ErrDevice/lpt9_txt", "LPT9.txt", "device name"},
		{"ErrDevice/aux_md_lower", "aux.md", "device name"},
		{"ErrDevice/prn_below", "output/prn", "device name"},
		{"ErrDevice/nul_tar_gz", "a/Nul.tar.gz", "device name"},
		{"ErrDevice/com_superscript", "COM\u00b9", "device name"},
		{"ErrDevice/space_before_dot", "con .txt", "device name"},
		{"ErrColon/a_b", "x/a:b", "':'"},
		{"ErrDrive/a_b", "a:b", `drive prefix "a:"`},
		{"ErrColon/ads", "main.md:ads", "':'"},
		{"ErrColon/later_segment", "a/C:/b", "':'"},
		{"ErrColon/first", ":x", "':'"},
		{"ErrTrailing/dot", "notes.", "ends with a dot or a space"},
		{"ErrTrailing/space", "notes /x", "ends with a dot or a space"},
		{"ErrTrailing/three_dots", "a/.../b", "ends with a dot or a space"},
		{"ErrTrailing/only_space", " /x", "ends with a dot or a space"},
		{"ErrBidi/rlo", "invoice\u202egpj.exe", "bidi control"},
		{"ErrBidi/lri", "a\u2066b", "bidi control"},
		{"ErrBidi/lrm", "a\u200eb", "bidi control"},
		{"ErrZeroWidth/zwsp", "ma\u200bin.md", "zero-width"},
		{"ErrZeroWidth/zwj", "a\u200db", "zero-width"},
		{"ErrZeroWidth/bom", "\ufeffa.md", "zero-width"},
		{"ErrInvisible/softHyphen", "ma\u00adin.md", "invisible"},
		{"ErrInvisible/graphemeJoiner", "a\u034fb", "invisible"},
		{"ErrInvisible/hangulFiller", "a\u3164.md", "invisible"},
		{"ErrNFC/decomposed", "re\u0301sume\u0301.md", "NFC"},

		{"ErrDotDot/alone", "..", "'..' segment"},
		{"ErrDotDot/trailing", "a/..", "'..' segment"},
		{"ErrDotDot/trailing_slash", "a/../", "'..' segment"},
		{"ErrDotDot/stays_inside", "a/../b", "'..' segment"},
		{"ErrDotDot/after_dot", "./../x", "'..' segment"},
		{"ErrDotDot/after_double_slash", "a//../b", "'..' segment"},
		{"ErrAbsolute/root_slash", "/", "absolute"},
		{"ErrAbsolute/slash_dot_dot", "/..", "absolute"},
		{"ErrAbsolute/etc", "/etc/passwd", "absolute"},
		{"ErrUNC/server", "//server/share", "UNC"},
		{"ErrUNC/triple_slash", "///x", "UNC"},
		{"ErrUNC/only_slashes", "//", "UNC"},
		{"ErrDrive/upper", "C:", `drive prefix "C:"`},
		{"ErrDrive/lower_relative", "c:foo", `drive prefix "c:"`},
		{"ErrDrive/forward_slashes", "D:/data/x", `drive prefix "D:"`},
		{"ErrDrive/after_dot_slash", "./z:/x", `drive prefix "z:"`},
		{"ErrDrive/after_double_slash_dot", ".//Z:x", `drive prefix "Z:"`},
		{"ErrBackslash/windows_separator", `output\main.md`, "backslash"},
		{"ErrBackslash/trailing", `a\`, "backslash"},
		{"ErrBackslash/unc", `\\server\share`, "backslash"},
		{"ErrBackslash/leading", `\x`, "backslash"},
		{"ErrBackslash/dot_dot", `..\secrets.json`, "backslash"},
		{"ErrBackslash/later_segment", `a/b\..\..\c`, "backslash"},
		{"ErrNUL/leading", "\x00", "NUL"},
		{"ErrNUL/trailing", "a.txt\x00", "NUL"},
		{"ErrControl/newline", "a\nb", "control character U+000A"},
		{"ErrControl/tab", "a\tb", "control character U+0009"},
		{"ErrControl/carriage_return", "a\r", "control character U+000D"},
		{"ErrControl/escape", "\x1b[31m", "control character U+001B"},
		{"ErrControl/unit_separator", "a\x1fb", "control character U+001F"},
		{"ErrControl/delete", "a\x7f", "control character U+007F"},
		{"ErrUTF8/lone_continuation", "a/\x80", "UTF-8"},
		{"ErrUTF8/truncated", "a\xc3", "UTF-8"},
		{"ErrUTF8/overlong_slash", "a\xc0\xafb", "UTF-8"},
		{"ErrUTF8/surrogate", "\xed\xa0\x80", "UTF-8"},
		{"ErrRoot/dot", ".", "workspace root"},
		{"ErrRoot/dot_slash", "./", "workspace root"},
		{"ErrRoot/dots_and_slashes", "././/.", "workspace root"},
		{"ErrSegmentTooLong/first", long(MaxSegmentLen + 1), "segment 1 is 256 bytes"},
		{"ErrSegmentTooLong/second", "a/" + long(300), "segment 2 is 300 bytes"},
		{"ErrPathTooLong/one_over", maxPath + "b", "4097 bytes"},
		{"ErrPathTooLong/dots_normalising_short", strings.Repeat("./", MaxPathLen) + "a", "bytes, longer than the limit"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePath(tc.in)
			we := requireInvalidPath(t, err, "parse path", tc.msg)
			assert.Equal(t, Path{}, p)
			assert.True(t, errors.Is(err, &wserr.Error{Code: wserr.InvalidPath}))
			if len(tc.in) <= maxQuotedInput {
				assert.Equal(t, quotePathInput(tc.in), we.Path)
			}
		})
	}
}

func TestParsePathErrorQuotesInput(t *testing.T) {
	t.Run("OK/control_bytes_escaped", func(t *testing.T) {
		_, err := ParsePath("scratch/\x00bad\n\xff")
		we := requireInvalidPath(t, err, "parse path", "")
		assert.Equal(t, `"scratch/\x00bad\n\xff"`, we.Path)
		assert.NotContains(t, err.Error(), "\x00")
		assert.NotContains(t, err.Error(), "\n")
	})
	t.Run("OK/long_input_cut", func(t *testing.T) {
		_, err := ParsePath("/" + strings.Repeat("a", 10000))
		we := requireInvalidPath(t, err, "parse path", "longer than the limit")
		assert.Less(t, len(we.Path), maxQuotedInput+10)
		assert.True(t, strings.HasSuffix(we.Path, `"...`), we.Path)
	})
	t.Run("OK/long_input_cut_between_characters", func(t *testing.T) {
		_, err := ParsePath("output/" + strings.Repeat("é", 200))
		we := requireInvalidPath(t, err, "parse path", "")
		assert.NotContains(t, we.Path, `\x`, "no byte of a cut character: %s", we.Path)
		assert.True(t, strings.HasSuffix(we.Path, `é"...`), we.Path)
	})
	t.Run("OK/error_string", func(t *testing.T) {
		_, err := ParsePath("../secrets.json")
		require.Error(t, err)
		assert.Equal(t,
			`parse path "../secrets.json": workspace.invalid_path: path contains a '..' segment; name the file from the workspace root instead`,
			err.Error())
	})
}

func TestMustPath(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		assert.Equal(t, "output/main.md", MustPath("./output//main.md/").String())
	})
	t.Run("ErrPanics", func(t *testing.T) {
		assert.Panics(t, func() { MustPath("../x") })
		assert.Panics(t, func() { MustPath(".") })
	})
}

func TestPathRoot(t *testing.T) {
	r := Root()
	assert.Equal(t, Path{}, r)
	assert.True(t, r.IsRoot())
	assert.Equal(t, ".", r.String())
	assert.Nil(t, r.Segments())
	assert.Equal(t, ".", r.Base())
	assert.Equal(t, r, r.Dir())
	assert.Equal(t, "", r.Top())
	assert.True(t, r.HasPrefix(r))
	assert.False(t, r.HasPrefix(MustPath("a")))
	assert.False(t, MustPath("a").IsRoot())
}

// TestNamesRoot: the relative spellings of the root are those ParsePath
// refuses only for naming the root; "/" is absolute and ".." escapes.
func TestNamesRoot(t *testing.T) {
	for _, s := range []string{"", ".", "./", "./.", ".//", "./././"} {
		assert.True(t, NamesRoot(s), "%q", s)
		if s != "" {
			_, err := ParsePath(s)
			requireInvalidPath(t, err, "parse path", "names the workspace root")
		}
	}
	for _, s := range []string{"/", "/.", "//.", "..", "./..", "a", "./a", ". /", "...", `.\`} {
		assert.False(t, NamesRoot(s), "%q", s)
	}
}

func TestPathAccessors(t *testing.T) {
	cases := []struct {
		in, base, dir, top string
		segs               []string
	}{
		{"output/main.md", "main.md", "output", "output", []string{"output", "main.md"}},
		{"a", "a", ".", "a", []string{"a"}},
		{"a/b/c", "c", "a/b", "a", []string{"a", "b", "c"}},
		{".env/x y/z", "z", ".env/x y", ".env", []string{".env", "x y", "z"}},
	}
	for _, tc := range cases {
		t.Run("OK/"+tc.in, func(t *testing.T) {
			p := MustPath(tc.in)
			assert.Equal(t, tc.base, p.Base())
			assert.Equal(t, tc.dir, p.Dir().String())
			assert.Equal(t, tc.top, p.Top())
			assert.Equal(t, tc.segs, p.Segments())
		})
	}

	t.Run("OK/segments_is_a_copy", func(t *testing.T) {
		p := MustPath("a/b")
		p.Segments()[0] = "x"
		assert.Equal(t, "a/b", p.String())
	})
	t.Run("OK/dir_walks_to_root", func(t *testing.T) {
		p := MustPath("a/b/c")
		var seen []string
		for !p.IsRoot() {
			seen = append(seen, p.String())
			p = p.Dir()
		}
		assert.Equal(t, []string{"a/b/c", "a/b", "a"}, seen)
	})
}

func TestPathJoin(t *testing.T) {
	ok := []struct {
		name string
		dir  Path
		elem string
		want string
	}{
		{"root_child", Root(), "output", "output"},
		{"nested", MustPath("output"), "main.md", "output/main.md"},
		{"hidden", MustPath("a/b"), ".git", "a/b/.git"},
	}
	for _, tc := range ok {
		t.Run("OK/"+tc.name, func(t *testing.T) {
			p, err := tc.dir.Join(tc.elem)
			require.NoError(t, err)
			assert.Equal(t, tc.want, p.String())
			assert.Equal(t, tc.dir, p.Dir())
			assert.Equal(t, tc.elem, p.Base())
			assert.Equal(t, MustPath(tc.want), p)
		})
	}

	errs := []struct {
		name string
		dir  Path
		elem string
		msg  string
	}{
		{"ErrEmpty/root", Root(), "", "name is empty"},
		{"ErrEmpty/nested", MustPath("a"), "", "name is empty"},
		{"ErrDot/nested", MustPath("a"), ".", "name is '.'"},
		{"ErrDotDot/nested", MustPath("a"), "..", "'..' segment"},
		{"ErrDotDot/root", Root(), "..", "'..' segment"},
		{"ErrSlash/two_segments", MustPath("a"), "b/c", "contains '/'"},
		{"ErrSlash/absolute", MustPath("a"), "/etc", "contains '/'"},
		{"ErrSlash/trailing", MustPath("a"), "b/", "contains '/'"},
		{"ErrBackslash/name", MustPath("a"), `b\c`, "backslash"},
		{"ErrDrive/at_root", Root(), "C:", "drive prefix"},
		{"ErrNUL/name", MustPath("a"), "b\x00", "NUL"},
		{"ErrControl/name", MustPath("a"), "b\n", "control character"},
		{"ErrUTF8/name", MustPath("a"), "\xff", "UTF-8"},
		{"ErrSegmentTooLong/name", MustPath("a"), strings.Repeat("x", MaxSegmentLen+1), "segment 2 is 256 bytes"},
		{"ErrPathTooLong/total", MustPath(strings.Repeat("a/", 2047) + "a"), "bb", "longer than the limit of 4096"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.dir.Join(tc.elem)
			requireInvalidPath(t, err, "join path", tc.msg)
			assert.Equal(t, Path{}, p)
		})
	}
}

func TestPathHasPrefix(t *testing.T) {
	cases := []struct {
		name string
		p, q Path
		want bool
	}{
		{"OK/self", MustPath("output/x"), MustPath("output/x"), true},
		{"OK/parent", MustPath("output/x"), MustPath("output"), true},
		{"OK/grandparent", MustPath("a/b/c"), MustPath("a"), true},
		{"OK/root", MustPath("a/b"), Root(), true},
		{"OK/root_of_root", Root(), Root(), true},
		{"OK/not_string_prefix", MustPath("output/x"), MustPath("out"), false},
		{"OK/not_partial_segment", MustPath("a/bc"), MustPath("a/b"), false},
		{"OK/child_is_not_prefix", MustPath("a"), MustPath("a/b"), false},
		{"OK/sibling", MustPath("a/b"), MustPath("a/c"), false},
		{"OK/root_has_no_prefix", Root(), MustPath("a"), false},
		{"OK/longer_same_start", MustPath("ab"), MustPath("a"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.p.HasPrefix(tc.q))
		})
	}
}

func TestPathText(t *testing.T) {
	type doc struct {
		P Path  `json:"p"`
		Q *Path `json:"q,omitempty"`
	}

	t.Run("OK/round_trip", func(t *testing.T) {
		for _, p := range []Path{Root(), MustPath("output/main.md"), MustPath("données/🚀")} {
			b, err := json.Marshal(doc{P: p})
			require.NoError(t, err)
			var got doc
			require.NoError(t, json.Unmarshal(b, &got))
			assert.Equal(t, p, got.P)
		}
	})
	t.Run("OK/json_string", func(t *testing.T) {
		b, err := json.Marshal(doc{P: MustPath("output/main.md")})
		require.NoError(t, err)
		assert.JSONEq(t, `{"p":"output/main.md"}`, string(b))

		b, err = json.Marshal(doc{})
		require.NoError(t, err)
		assert.JSONEq(t, `{"p":"."}`, string(b))
	})
	t.Run("OK/unmarshal_normalises", func(t *testing.T) {
		var got doc
		require.NoError(t, json.Unmarshal([]byte(`{"p":"./output//main.md/"}`), &got))
		assert.Equal(t, MustPath("output/main.md"), got.P)
	})
	t.Run("OK/pointer_field", func(t *testing.T) {
		var got doc
		require.NoError(t, json.Unmarshal([]byte(`{"p":"a","q":"b/c"}`), &got))
		require.NotNil(t, got.Q)
		assert.Equal(t, MustPath("b/c"), *got.Q)
	})

	errs := []struct {
		name, in, msg string
	}{
		{"ErrDotDot/escape", `{"p":"../secrets.json"}`, "'..' segment"},
		{"ErrAbsolute/users", `{"p":"/Users/me/file"}`, "absolute"},
		{"ErrDrive/windows", `{"p":"C:\\Users\\me\\file"}`, "drive prefix"},
		{"ErrNUL/escaped", `{"p":"scratch/\u0000bad"}`, "NUL"},
		{"ErrEmpty/empty", `{"p":""}`, "empty"},
		{"ErrRoot/dot_slash", `{"p":"./"}`, "workspace root"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			var got doc
			err := json.Unmarshal([]byte(tc.in), &got)
			requireInvalidPath(t, err, "parse path", tc.msg)
			assert.True(t, wserr.Is(err, wserr.InvalidPath))
		})
	}
	t.Run("ErrNotString", func(t *testing.T) {
		var got doc
		assert.Error(t, json.Unmarshal([]byte(`{"p":1}`), &got))
	})
}

func TestEndsAsDirectory(t *testing.T) {
	for s, want := range map[string]bool{
		"output/dir/": true, "output/dir/.": true, "output/dir//": true, "output/./": true, "a/": true,
		"output/a.md": false, "output/.hidden": false, "output/a.": false, ".": false, "": false, "a": false, "./a": false,
	} {
		assert.Equal(t, want, EndsAsDirectory(s), "%q", s)
	}
}

// TestCheckFileSpelling: a file named with a directory's ending is
// invalid_path, naming the spelling given; a directory, or a file named
// plainly, passes.
func TestCheckFileSpelling(t *testing.T) {
	for _, s := range []string{"output/a.md/", "output/a.md/.", "output/a.md//"} {
		err := CheckFileSpelling("read", s, MustPath(s), KindFile)
		var we *wserr.Error
		require.ErrorAs(t, err, &we, s)
		assert.Equal(t, wserr.InvalidPath, we.Code)
		assert.Equal(t, s, we.Path)
		assert.Contains(t, we.Error(), "output/a.md is a file")
	}
	assert.NoError(t, CheckFileSpelling("stat", "output/dir/", MustPath("output/dir"), KindDir))
	assert.NoError(t, CheckFileSpelling("read", "output/a.md", MustPath("output/a.md"), KindFile))
}
