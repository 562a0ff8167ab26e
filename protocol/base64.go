package protocol

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"
)

// decodeBase64 decodes the standard base64 text s, the value of the
// request field named field; text that is not is refused with
// badBase64's error.
func decodeBase64(field, s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, badBase64(field, s)
	}
	return b, nil
}

// badBase64 is the batch.invalid_request error for the value s of field,
// which is not standard base64: it names the field, the byte offset in s
// (from 0) where the text stops being base64, and why.
func badBase64(field, s string) error {
	at, why := base64Fault(s)
	if why == "" {
		why = "the decoder refused it"
	}
	return invalidRequest("field %q is not standard base64: at byte offset %d, %s", field, at, why)
}

// base64Fault returns the offset in s of the first byte that standard
// base64, as the decoder reads it (line breaks skipped, the last group of
// four padded with =), cannot take, and why. For text that is base64 it
// returns len(s) and an empty reason.
func base64Fault(s string) (int, string) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	n, pads := 0, 0 // characters of the current group, and the = among them
	ended := false  // a padded group ended the content
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\r' || c == '\n':
			continue
		case ended:
			return i, "text follows the = that ended the content"
		case c == '=':
			if n < 2 {
				return i, "= pads only the last one or two characters of a group of four"
			}
			pads++
		case strings.IndexByte(alphabet, c) >= 0:
			if pads > 0 {
				return i, "a character follows the = that pads its group"
			}
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			return i, fmt.Sprintf("%q is not a base64 character (A-Z, a-z, 0-9, + and /, = to pad)", r)
		}
		n++
		if n == 4 {
			ended = pads > 0
			n, pads = 0, 0
		}
	}
	if n > 0 {
		return len(s), "it ends inside a group of four characters (standard base64 pads the last group with =)"
	}
	return len(s), ""
}
