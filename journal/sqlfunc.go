package journal

import (
	"database/sql/driver"
	"errors"
	"fmt"

	"modernc.org/sqlite"
)

// payloadJSONFunc is the name of the SQL function that returns the JSON
// text of a stored payload, plain or packed:
//
//	SELECT json_extract(payload_json(payload), '$.path') FROM events
//
// It is registered with the sqlite driver when the package is
// initialized, so every connection the process opens afterwards has it.
const payloadJSONFunc = "payload_json"

func init() {
	sqlite.MustRegisterDeterministicScalarFunction(payloadJSONFunc, 1, payloadJSON)
}

// payloadJSON implements payload_json(payload). NULL gives NULL; a payload
// that does not decode, or a value that cannot be a payload, is an SQL
// error.
func payloadJSON(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	var stored []byte
	switch v := args[0].(type) {
	case nil:
		return nil, nil
	case string:
		stored = []byte(v)
		if !isPlain(stored) {
			// Append stores a packed payload as a BLOB. The driver hands a
			// function TEXT only up to its first NUL, and every hash of a
			// packed payload starts with one, so decoding could return a
			// silently shortened payload.
			return nil, errors.New(payloadJSONFunc + ": a packed payload stored as TEXT; want a BLOB")
		}
		return v, nil
	case []byte:
		stored = v
	default:
		return nil, fmt.Errorf("%s: a payload is TEXT or a BLOB, not %T", payloadJSONFunc, v)
	}
	js, err := decodePayload(stored)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", payloadJSONFunc, err)
	}
	return string(js), nil
}
