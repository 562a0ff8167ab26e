package remote

import (
	"context"

	"github.com/wsstore/wsstore/index"
)

// UnpushGone is unpushGone, for the tests outside the package: what
// CheckPublished does once it found the store's last segment gone.
func (s *Storage) UnpushGone(ctx context.Context, db *index.DB) (repush, lost int, err error) {
	return s.unpushGone(ctx, db)
}
