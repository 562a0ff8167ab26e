package cas

import (
	"database/sql/driver"
	"encoding/hex"
	"fmt"

	"lukechampine.com/blake3"
	"lukechampine.com/blake3/guts"

	"github.com/wsstore/wsstore/wserr"
)

// Hash is a content address: the BLAKE3-256 digest of a content's plain
// (uncompressed) bytes.
type Hash [32]byte

// ShortLen is the number of hex digits in a Hash's short form.
const ShortLen = 12

// Sum returns the address of b. It allocates nothing.
func Sum(b []byte) Hash {
	if len(b) <= guts.ChunkSize {
		return Hash(blake3.Sum256(b)) // one chunk: no hasher
	}
	return sumLarge(b)
}

// ParseHash parses the 64-digit lowercase or uppercase hex form of a Hash.
// It fails with workspace.invalid_argument on any other input.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return Hash{}, wserr.New(wserr.InvalidArgument, "parse hash", "", "hash %q must be %d hex digits", truncate(s), 2*len(h))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return Hash{}, wserr.New(wserr.InvalidArgument, "parse hash", "", "hash %q is not hex", truncate(s))
	}
	return h, nil
}

// MustParseHash is ParseHash for constants in tests; it panics on error.
func MustParseHash(s string) Hash {
	h, err := ParseHash(s)
	if err != nil {
		panic(err)
	}
	return h
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// String returns the 64-digit lowercase hex form.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// Short returns the first ShortLen hex digits, for people reading a listing.
func (h Hash) Short() string { return h.String()[:ShortLen] }

// IsZero reports whether h is the zero Hash, which addresses nothing.
func (h Hash) IsZero() bool { return h == Hash{} }

// MarshalText encodes h as hex, so Hash is a JSON string.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText parses hex into h.
func (h *Hash) UnmarshalText(b []byte) error {
	v, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// Value stores a Hash as a 32-byte BLOB; the zero Hash is stored as NULL.
func (h Hash) Value() (driver.Value, error) {
	if h.IsZero() {
		return nil, nil
	}
	return h[:], nil
}

// Scan reads a Hash from a 32-byte BLOB; NULL reads as the zero Hash.
func (h *Hash) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*h = Hash{}
		return nil
	case []byte:
		if len(v) != len(h) {
			return fmt.Errorf("scan hash: %d bytes, want %d", len(v), len(h))
		}
		copy(h[:], v)
		return nil
	}
	return fmt.Errorf("scan hash: unsupported type %T", src)
}
