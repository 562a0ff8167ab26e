package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote/s3fake"
)

// motoTier starts moto with the bucket "wsstore", credentials in the
// environment, and returns it and the URL of prefix there.
func motoTier(t *testing.T, prefix string) (*s3fake.Moto, string) {
	t.Helper()
	awsEnv(t)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsstore")
	return m, "s3://wsstore/" + prefix + "?endpoint=" + m.URL
}

// motoClient is a client of the test's own for m.
func motoClient(m *s3fake.Moto) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(m.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// motoObject returns the object at key in m's bucket "wsstore".
func motoObject(t *testing.T, m *s3fake.Moto, key string) []byte {
	t.Helper()
	out, err := motoClient(m).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("wsstore"), Key: aws.String(key)})
	require.NoError(t, err)
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	require.NoError(t, err)
	return data
}

// objectsUnder returns the ETag of every object under prefix in m's
// bucket "wsstore", by key.
func objectsUnder(t *testing.T, m *s3fake.Moto, prefix string) map[string]string {
	t.Helper()
	cl := motoClient(m)
	out := map[string]string{}
	p := s3.NewListObjectsV2Paginator(cl, &s3.ListObjectsV2Input{Bucket: aws.String("wsstore"), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, o := range page.Contents {
			out[aws.ToString(o.Key)] = aws.ToString(o.ETag)
		}
	}
	return out
}

// storeState is what c's store holds, as wsctl shows it: its runs and
// every checkpoint of each with its files' hashes.
func (c *cli) storeState() string {
	c.t.Helper()
	var b strings.Builder
	b.WriteString(c.ok("runs", "--json"))
	for _, id := range c.runIDs() {
		b.WriteString(c.ok("checkpoints", id, "--json"))
	}
	return b.String()
}

// restoreFrom restores the replica at url into a new directory, reading
// every file back from the object store, and returns a cli on it.
func restoreFrom(t *testing.T, url string) *cli {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	var rep struct {
		Problems int `json:"problems"`
	}
	newCLI(t).jsonOut(&rep, "restore", "--from", url, "--verify", dir)
	require.Zero(t, rep.Problems)
	return &cli{t: t, store: dir, env: map[string]string{}}
}

// TestReplicaRefusesASecondStore: a store replicating to a URL another
// store replicates to is refused with store.conflict naming both and what
// to do, before anything at the URL changes, and the replica still
// restores the first store whole; --take-over makes the URL the second
// store's, and the first is refused there from then on.
func TestReplicaRefusesASecondStore(t *testing.T) {
	m, tier := motoTier(t, "desk")
	url := "s3://wsstore/shared?endpoint=" + m.URL
	desk, laptop := newCLI(t), newCLI(t)
	desk.ok("--blobs", tier, "demo")
	desk.ok("demo")
	desk.ok("replicate", "--once", "--to", url)
	before := objectsUnder(t, m, "shared/")
	require.Contains(t, before, "shared/owner.json")
	var owner struct {
		Version int    `json:"version"`
		Device  string `json:"device"`
	}
	require.NoError(t, json.Unmarshal(motoObject(t, m, "shared/owner.json"), &owner))
	assert.Equal(t, 1, owner.Version)
	assert.Len(t, owner.Device, 16)

	laptop.ok("demo")
	errOut := laptop.fails(5, "replicate", "--once", "--to", url)
	assert.Contains(t, errOut, "store.conflict")
	assert.Contains(t, errOut, "belongs to another store, device "+owner.Device)
	assert.Contains(t, errOut, desk.store, "names the store replicating there")
	assert.Contains(t, errOut, laptop.store, "names this store")
	assert.Contains(t, errOut, "--take-over")
	assert.Equal(t, before, objectsUnder(t, m, "shared/"), "nothing at the URL changed")
	// The refused store can replicate again at once: it left no lock.
	laptop.fails(5, "replicate", "--once", "--to", url)

	restored := restoreFrom(t, url)
	assert.Equal(t, desk.storeState(), restored.storeState(), "the first store's replica restores whole")

	laptop.ok("replicate", "--once", "--to", url, "--take-over")
	assert.Equal(t, laptop.storeState(), restoreFrom(t, url).storeState(), "taken over: the second store restores")
	errOut = desk.fails(5, "replicate", "--once", "--to", url)
	assert.Contains(t, errOut, "store.conflict")
	assert.Contains(t, errOut, laptop.store)
	laptop.ok("replicate", "--once", "--to", url)
}

// TestRestoredStoreContinuesItsReplica: a store restored from a replica
// replicates back to its URL (the default one of its tier) as the
// replica's owner, and a later restore gives it with what it wrote
// since; the store it was restored from is refused there from then on,
// at its next round when it is still replicating, and so is a second
// copy restored from the same replica, which is now another store's.
func TestRestoredStoreContinuesItsReplica(t *testing.T) {
	m, tier := motoTier(t, "desk")
	desk := newCLI(t)
	desk.ok("--blobs", tier, "demo")
	running := startReplicate(t, desk)
	running.waitFor("the first round", func() bool {
		for k := range objectsUnder(t, m, "desk/meta/") {
			if k != "desk/meta/owner.json" {
				return true
			}
		}
		return false
	})

	copyA, copyB := restoreFrom(t, tier), restoreFrom(t, tier)
	assert.Equal(t, desk.runIDs(), copyA.runIDs())
	copyA.ok("demo")
	copyA.ok("replicate", "--once")
	var res replicateResult
	select {
	case res = <-running.done:
	case <-time.After(60 * time.Second):
		t.Fatal("replicate of the store restored from goes on")
	}
	assert.Equal(t, 5, res.code, "the store restored from stops at its next round: %s", res.errOut)
	assert.Contains(t, res.errOut, "store.conflict")
	assert.Contains(t, res.errOut, "a store restored from this store's replica replicates here now")
	assert.Contains(t, res.errOut, copyA.store)

	again := restoreFrom(t, tier)
	assert.Len(t, again.runIDs(), 2, "what the restored store wrote since")
	assert.Equal(t, copyA.storeState(), again.storeState())

	errOut := desk.fails(5, "replicate", "--once")
	assert.Contains(t, errOut, "a store restored from this store's replica replicates here now")
	errOut = copyB.fails(5, "replicate", "--once")
	assert.Contains(t, errOut, "belongs to another store")
	assert.Contains(t, errOut, copyA.store)
	copyA.ok("replicate", "--once")
}
