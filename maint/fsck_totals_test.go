package maint_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/maint"
)

// TestFsckActorTotalsBeyondSpill: the totals fsck keeps of the trees below
// the actor spaces hold past the bound at which its work sets go to disk
// (lowered to 4 objects, below the 40 trees of each space): a sound space
// is clean, one whose row keeps a wrong count is reported.
func TestFsckActorTotalsBeyondSpill(t *testing.T) {
	defer maint.SetSpillAfter(4)()
	s := storetest.OpenStore(t)
	ctx := context.Background()
	for _, actor := range []string{"alice", "bob"} {
		for i := range 40 {
			p := fmt.Sprintf("d%d/e%d/f%d.md", i%8, i%5, i)
			_, err := s.Actors.Upload(ctx, actor, p, strings.NewReader(actor+p))
			require.NoError(t, err)
		}
	}
	m := newMaintainer(s)

	rep, err := m.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, []maint.Problem{}, rep.Problems)

	st, err := s.Actors.Stats(ctx, "bob")
	require.NoError(t, err)
	require.Equal(t, int64(40), st.Files)
	require.Equal(t, int64(8+40), st.Dirs, "8 directories of 5 each")
	require.NoError(t, s.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE actor_spaces SET dirs = dirs - 1 WHERE actor = 'bob'`)
		return err
	}))
	rep, err = m.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, []maint.Problem{{Kind: "actor", Ref: "bob", Detail: fmt.Sprintf(
		"its row counts 40 files, 47 directories and %d bytes, its tree holds 40 files, 48 directories and %[1]d bytes", st.Bytes)}}, rep.Problems)
	require.NoError(t, s.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE actor_spaces SET dirs = dirs + 1 WHERE actor = 'bob'`)
		return err
	}))
}
