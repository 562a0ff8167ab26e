package remote_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// hugeObject is a lock or owner object no build writes: 32 MiB.
var hugeObject = bytes.Repeat([]byte(" "), 32<<20)

// TestHugeLockIsNotHeld: a lock object of 32 MiB under the reclaim
// leases, which anyone who can write to the bucket could put there, is
// read no further than any lock's length: the sync's lock counts it
// unreadable (expired) and holding it never took more than a few MiB.
func TestHugeLockIsNotHeld(t *testing.T) {
	srv := fakeBucket(t)
	st := openStorage(t, srv.URL, "bkt", "store", remote.Options{})
	srv.SetObject("bkt", "store/locks/reclaim/00000000000000000001", hugeObject)
	var err error
	var release func(context.Context, error) error
	grew := storetest.HeapGrowth(func() { release, err = st.LockSync(context.Background(), "dev1") })
	require.NoError(t, err)
	require.NoError(t, release(context.Background(), nil))
	assert.Less(t, grew, uint64(8<<20), "heap growth reading the locks")
}

// TestHugeOwnerObjectIsNotHeld: an owner object of 32 MiB is one this
// build does not read (store.corrupt), read no further than any owner
// object's length.
func TestHugeOwnerObjectIsNotHeld(t *testing.T) {
	srv := fakeBucket(t)
	srv.SetObject("bkt", "meta/"+remote.OwnerKey, hugeObject)
	var err error
	grew := storetest.HeapGrowth(func() {
		_, err = remote.ClaimReplica(context.Background(), "s3://bkt/meta?endpoint="+srv.URL+"&region=us-east-1", remote.ReplicaOwner{Device: "00000000000000a0"}, false)
	})
	assert.True(t, wserr.Is(err, wserr.Corrupt), "%v", err)
	assert.Less(t, grew, uint64(8<<20), "heap growth reading the owner object")
}
