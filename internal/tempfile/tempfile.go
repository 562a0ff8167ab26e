// Package tempfile makes the temporary files the store keeps for work too
// large for memory.
package tempfile

import (
	"errors"
	"os"
)

// Create creates a temporary file in os.TempDir named after pattern (as
// os.CreateTemp takes it) and returns it with the function that closes
// and removes it. Where the system allows, the file is unlinked at once,
// so that a process killed before it is done leaves nothing behind.
func Create(pattern string) (*os.File, func() error, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, nil, err
	}
	if os.Remove(f.Name()) == nil {
		return f, f.Close, nil
	}
	return f, func() error { return errors.Join(f.Close(), os.Remove(f.Name())) }, nil
}
