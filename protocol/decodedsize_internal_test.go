package protocol

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestDecodedSize: the size an actor.upload's contentBase64 takes from
// the store cap's room is what it decodes to, line breaks or not.
func TestDecodedSize(t *testing.T) {
	for _, plain := range []string{"", "a", "ab", "abc", "abcd", strings.Repeat("x", 1000)} {
		enc := base64.StdEncoding.EncodeToString([]byte(plain))
		var wrapped strings.Builder
		for i := 0; i < len(enc); i += 76 {
			wrapped.WriteString(enc[i:min(i+76, len(enc))])
			wrapped.WriteString("\r\n")
		}
		for _, s := range []string{enc, wrapped.String()} {
			if got := decodedSize(s); got != int64(len(plain)) {
				t.Errorf("decodedSize(%q) = %d, want %d", s, got, len(plain))
			}
		}
	}
}
