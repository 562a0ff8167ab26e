package index

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEndedByRollbackKnowsItsErrors: the errors database/sql answers for
// a read it rolled back when its context ended (the transaction done, a
// statement or a statement's rows closed under it) are recognised,
// wrapped or not; others are not.
func TestEndedByRollbackKnowsItsErrors(t *testing.T) {
	for _, err := range []error{
		sql.ErrTxDone,
		fmt.Errorf("list: %w", sql.ErrTxDone),
		errors.New("sql: statement is closed"),
		errors.New("sql: Rows are closed"),
		fmt.Errorf("scan blobs: %w", errors.New("sql: Rows are closed")),
	} {
		assert.True(t, endedByRollback(err), "%v", err)
	}
	for _, err := range []error{
		sql.ErrNoRows,
		errors.New("database is locked"),
		errors.New("sql: no rows in result set"),
	} {
		assert.False(t, endedByRollback(err), "%v", err)
	}
}
