package remote_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// TestClaimReplica: of stores claiming one empty replica URL at once,
// exactly one gets it (the owner object is written once), the others get
// store.conflict; the owner claims again; a store restored from it takes
// the replica over and the owner's Check then fails; --take-over takes
// it from any store.
func TestClaimReplica(t *testing.T) {
	testEnv(t)
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsstore")
	ctx := context.Background()
	url := "s3://wsstore/meta?endpoint=" + m.URL

	const n = 4
	devices := []string{"00000000000000a0", "00000000000000a1", "00000000000000a2", "00000000000000a3"}
	claims := make([]*remote.Claim, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			claims[i], errs[i] = remote.ClaimReplica(ctx, url, remote.ReplicaOwner{Device: devices[i]}, false)
		})
	}
	wg.Wait()
	owner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, owner, "two stores claimed the replica: %d and %d", owner, i)
			owner = i
			continue
		}
		assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)
	}
	require.NotEqual(t, -1, owner, "no store claimed the replica: %v", errs)
	first := claims[owner]
	_, err := remote.ClaimReplica(ctx, url, remote.ReplicaOwner{Device: devices[owner]}, false)
	require.NoError(t, err, "the owner claims its replica again")
	require.NoError(t, first.Check(ctx))

	restored := remote.ReplicaOwner{Device: "00000000000000b0", Source: devices[owner]}
	second, err := remote.ClaimReplica(ctx, url, restored, false)
	require.NoError(t, err, "a store restored from the owner continues its replica")
	err = first.Check(ctx)
	assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)
	assert.ErrorContains(t, err, "a store restored from this store's replica replicates here now, device 00000000000000b0")
	_, err = remote.ClaimReplica(ctx, url, remote.ReplicaOwner{Device: devices[owner]}, false)
	assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "the store restored from is refused from then on: %v", err)

	other := devices[(owner+1)%n]
	_, err = remote.ClaimReplica(ctx, url, remote.ReplicaOwner{Device: other}, true)
	require.NoError(t, err, "--take-over")
	err = second.Check(ctx)
	assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)
	assert.ErrorContains(t, err, "belongs to another store, device "+other)

	_, err = remote.ClaimReplica(ctx, url, remote.ReplicaOwner{}, false)
	assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "no device: %v", err)
}
