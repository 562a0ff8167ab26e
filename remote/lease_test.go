package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// hooked carries a device's requests to the object store, calling before
// with each first: it may move the test's clock, or fail the request (an
// error, as a connection lost does).
type hooked struct {
	before func(r *http.Request) error
}

func (h *hooked) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.before != nil {
		if err := h.before(r); err != nil {
			return nil, err
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// leaseSetup is a bucket on moto holding what a reclaim removes one
// object at a time, and two devices on one fake clock: rec, whose
// requests go through hook, to reclaim, and syncer.
type leaseSetup struct {
	m       *s3fake.Moto
	bucket  string
	clock   *storetest.Clock
	hook    *hooked
	rec     *device
	recDev  string
	syncer  *device
	syncDev string
	objects int // what the reclaim removes: packs and index objects
}

// newLeaseSetup makes bucket on m with device A's packs, one object
// each, and their index objects, which A's base segment (naming no
// object) says no device uses. The clock stands an hour after the object
// store's, so with no grace every one of them may go. The reclaiming
// device's lease lasts leaseTTL (0: the default).
func newLeaseSetup(t *testing.T, m *s3fake.Moto, bucket string, leaseTTL time.Duration) *leaseSetup {
	t.Helper()
	ctx := context.Background()
	m.CreateBucket(bucket)
	a := newDevice(t, m.URL, bucket, remote.Options{PackSize: 1})
	a.put(t, contents(20))
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	devA, err := remote.Device(ctx, a.db)
	require.NoError(t, err)
	require.NoError(t, a.st.RegisterDevice(ctx, devA))
	_, err = a.st.PublishSegment(ctx, remote.SegmentHeader{Device: devA, At: time.Now(), Base: true}, nil, nil)
	require.NoError(t, err)

	s := &leaseSetup{m: m, bucket: bucket, clock: storetest.NewClockAt(time.Now().Add(time.Hour), 0), hook: &hooked{}}
	s.objects = len(s.keys(t, "store/data/")) + len(s.keys(t, "store/index/"))
	require.Greater(t, s.objects, 30)
	s.rec = newDevice(t, m.URL, bucket, remote.Options{Now: s.clock.Now, LeaseTTL: leaseTTL, HTTPClient: &http.Client{Transport: s.hook}})
	s.syncer = newDevice(t, m.URL, bucket, remote.Options{Now: s.clock.Now})
	s.recDev, err = remote.Device(ctx, s.rec.db)
	require.NoError(t, err)
	s.syncDev, err = remote.Device(ctx, s.syncer.db)
	require.NoError(t, err)
	return s
}

func (s *leaseSetup) client() *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.m.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

// keys lists the bucket's keys under prefix.
func (s *leaseSetup) keys(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := s.client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	require.NoError(t, err)
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, *o.Key)
	}
	return keys
}

// leaseEnds returns when the reclaim lease on the object store ends, by
// its body (zero when there is none).
func (s *leaseSetup) leaseEnds(t *testing.T) time.Time {
	t.Helper()
	keys := s.keys(t, "store/locks/reclaim/")
	if len(keys) == 0 {
		return time.Time{}
	}
	require.Len(t, keys, 1)
	out, err := s.client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(keys[0])})
	require.NoError(t, err)
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	require.NoError(t, err)
	var body struct {
		Expires time.Time `json:"expires"`
	}
	require.NoError(t, json.Unmarshal(b, &body))
	return body.Expires
}

// removal reports whether r removes one of the objects the reclaim is
// there for (not a lock).
func removal(r *http.Request) bool {
	return r.Method == http.MethodDelete && (strings.Contains(r.URL.Path, "/store/data/") || strings.Contains(r.URL.Path, "/store/index/"))
}

func renewal(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/store/locks/reclaim/")
}

// TestKilledReclaimBlocksOnlyItsLease: a reclaim killed part way (every
// request from its first removal on lost, its lease's removal too) leaves
// its lease, which refuses syncs and reclaims for the few minutes it
// lasts, and no longer: six minutes on, another device syncs and the
// killed device reclaims again. Before, the lease held an hour.
func TestKilledReclaimBlocksOnlyItsLease(t *testing.T) {
	testEnv(t)
	s := newLeaseSetup(t, s3fake.StartMoto(t), "wsstore-killed", 0)
	ctx := context.Background()
	killed := false
	s.hook.before = func(r *http.Request) error {
		if killed = killed || removal(r); killed {
			return errors.New("killed")
		}
		return nil
	}
	started := s.clock.Now()
	_, err := s.rec.st.Reclaim(ctx, s.rec.db, s.recDev, remote.ReclaimOptions{Grace: -1})
	require.Error(t, err)
	ends := s.leaseEnds(t)
	require.False(t, ends.IsZero(), "the killed reclaim left its lease")
	assert.Equal(t, started.Add(remote.DefaultLeaseTTL).UTC(), ends.UTC())
	s.hook.before = nil

	s.clock.Advance(4 * time.Minute)
	_, err = s.syncer.st.LockSync(ctx, s.syncDev)
	require.ErrorIs(t, err, remote.ErrLocked, "the lease holds for its few minutes")
	assert.True(t, wserr.Is(err, wserr.Busy), "%v", err)
	_, err = s.rec.st.Reclaim(ctx, s.rec.db, s.recDev, remote.ReclaimOptions{Grace: -1})
	require.ErrorIs(t, err, remote.ErrLocked)
	assert.Contains(t, err.Error(), "this device ("+s.recDev+") holds the lock")

	s.clock.Advance(2 * time.Minute)
	release, err := s.syncer.st.LockSync(ctx, s.syncDev)
	require.NoError(t, err, "six minutes on, the lease has ended")
	require.NoError(t, release(ctx, nil))
	st, err := s.rec.st.Reclaim(ctx, s.rec.db, s.recDev, remote.ReclaimOptions{Grace: -1})
	require.NoError(t, err)
	assert.Equal(t, s.objects, st.Packs+st.Indexes)
	assert.Empty(t, s.keys(t, "store/locks/"), "the ended lease is removed with the reclaim's own")
}

// TestLongReclaimKeepsItsLease: a reclaim whose removals take two minutes
// each, far longer in all than its lease (over an hour), writes the
// lease again as it goes: whenever it sends a removal, the lease on the
// object store holds for at least two thirds of its time, a sync that
// starts in the middle is refused, and everything goes. Before, the
// lease was written once, for an hour, and the removals went on after
// it ended.
func TestLongReclaimKeepsItsLease(t *testing.T) {
	testEnv(t)
	s := newLeaseSetup(t, s3fake.StartMoto(t), "wsstore-long", 0)
	ctx := context.Background()
	removed, renewals := 0, 0
	var short []time.Duration // lease time left at a removal, below two thirds
	var syncErr error
	s.hook.before = func(r *http.Request) error {
		if renewal(r) {
			renewals++
		}
		if !removal(r) {
			return nil
		}
		if left := s.leaseEnds(t).Sub(s.clock.Now()); left < remote.DefaultLeaseTTL*2/3 {
			short = append(short, left)
		}
		if removed++; removed == s.objects/2 {
			_, syncErr = s.syncer.st.LockSync(ctx, s.syncDev)
		}
		s.clock.Advance(2 * time.Minute)
		return nil
	}
	st, err := s.rec.st.Reclaim(ctx, s.rec.db, s.recDev, remote.ReclaimOptions{Grace: -1})
	require.NoError(t, err)
	assert.Equal(t, s.objects, st.Packs+st.Indexes)
	assert.Empty(t, s.keys(t, "store/data/"))
	assert.Greater(t, time.Duration(removed)*2*time.Minute, time.Hour, "the reclaim outlasted the old hour's lease")
	assert.Empty(t, short, "a removal was sent with less than two thirds of the lease left")
	t.Logf("%d removals over %v: the lease written %d times", removed, time.Duration(removed)*2*time.Minute, renewals)
	assert.GreaterOrEqual(t, renewals, removed, "a lease PUT before each two-minute removal")
	require.ErrorIs(t, syncErr, remote.ErrLocked, "a sync in the middle is refused")
	assert.Empty(t, s.keys(t, "store/locks/"), "the lease is released")
}

// TestLeaseHeldThroughABlockedStep: while one step of a reclaim blocks
// (here the read of a segment, as a long download does) for longer than
// its whole lease by the clock, its heartbeat writes the lease again each
// time a third of it has passed, and the reclaim then goes on and removes
// everything. Without the heartbeat the lease ended during the step and
// the reclaim stopped.
func TestLeaseHeldThroughABlockedStep(t *testing.T) {
	testEnv(t)
	const ttl = 6 * time.Second
	s := newLeaseSetup(t, s3fake.StartMoto(t), "wsstore-blocked", ttl)
	ctx := context.Background()
	var renewals atomic.Int64
	var blocked atomic.Bool
	beats := 0
	s.hook.before = func(r *http.Request) error {
		if renewal(r) {
			renewals.Add(1)
		}
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/store/sync/") || !blocked.CompareAndSwap(false, true) {
			return nil
		}
		// Four times a third of the lease passes; each time the lease
		// is written again before the step goes on.
		for range 4 {
			before := renewals.Load()
			s.clock.Advance(ttl / 3)
			for wait := 0; renewals.Load() == before && wait < 500; wait++ {
				time.Sleep(10 * time.Millisecond)
			}
			if renewals.Load() == before {
				return nil // not renewed: the reclaim finds its lease ended
			}
			beats++
		}
		return nil
	}
	st, err := s.rec.st.Reclaim(ctx, s.rec.db, s.recDev, remote.ReclaimOptions{Grace: -1})
	require.True(t, blocked.Load(), "the reclaim read a segment")
	assert.Equal(t, 4, beats, "the lease was written again while the step blocked")
	require.NoError(t, err)
	assert.Equal(t, s.objects, st.Packs+st.Indexes)
	assert.Empty(t, s.keys(t, "store/locks/"), "the lease is released")
}

// TestReclaimThatCannotRenewStops: a reclaim whose lease could not be
// written again in time removes nothing more, and says so with
// store.busy wrapping ErrLeaseLost: whether the renewal failed, was
// answered only after the lease ended, or a removal took longer than the
// whole lease (no renewal was due before it). Before, it removed
// everything whatever its lease.
func TestReclaimThatCannotRenewStops(t *testing.T) {
	testEnv(t)
	m := s3fake.StartMoto(t)
	for _, tt := range []struct {
		name string
		// hook is called with each request the reclaim sends, renewed
		// (true for a PUT of its lease after the first) and the clock;
		// it returns what the request's before returns, and whether
		// from this request on the lease may be another device's.
		hook func(r *http.Request, renewed bool, clock *storetest.Clock) (error, bool)
	}{
		{"RenewalFails", func(r *http.Request, renewed bool, clock *storetest.Clock) (error, bool) {
			if renewed {
				return errors.New("connection lost"), true
			}
			if removal(r) {
				clock.Advance(2 * time.Minute)
			}
			return nil, false
		}},
		{"RenewalAnsweredLate", func(r *http.Request, renewed bool, clock *storetest.Clock) (error, bool) {
			if renewed {
				clock.Advance(6 * time.Minute)
				return nil, true
			}
			if removal(r) {
				clock.Advance(2 * time.Minute)
			}
			return nil, false
		}},
		{"RemovalOutlastsLease", func(r *http.Request, _ bool, clock *storetest.Clock) (error, bool) {
			if removal(r) {
				clock.Advance(6 * time.Minute)
				return nil, true
			}
			return nil, false
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newLeaseSetup(t, m, "wsstore-"+strings.ToLower(tt.name), 0)
			ctx := context.Background()
			leases, removed, after := 0, 0, 0
			gone := false
			s.hook.before = func(r *http.Request) error {
				if removal(r) {
					removed++
					if gone {
						after++
					}
				}
				if renewal(r) {
					leases++
				}
				err, lost := tt.hook(r, renewal(r) && leases > 1, s.clock)
				gone = gone || lost
				return err
			}
			st, err := s.rec.st.Reclaim(ctx, s.rec.db, s.recDev, remote.ReclaimOptions{Grace: -1})
			require.ErrorIs(t, err, remote.ErrLeaseLost)
			assert.True(t, wserr.Is(err, wserr.Busy), "%v", err)
			assert.Contains(t, err.Error(), "removed nothing more")
			t.Logf("%v", err)
			assert.True(t, gone)
			assert.Positive(t, removed, "it removed some first")
			assert.Zero(t, after, "no removal was sent once the lease could be another's")
			assert.Equal(t, removed, st.Packs+st.Indexes)
			assert.Equal(t, s.objects-removed, len(s.keys(t, "store/data/"))+len(s.keys(t, "store/index/")), "nothing more went")
		})
	}
}

// cancelAfter carries a device's requests to the object store and calls
// after with each once it is answered.
type cancelAfter struct {
	after func(r *http.Request)
}

func (c *cancelAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && c.after != nil {
		c.after(r)
	}
	return resp, err
}

// TestCanceledReclaimIsNotALostLease: a reclaim whose context ends while
// a renewal of its lease is due (the caller interrupted it between two
// removals) fails with store.canceled, as any other step it stops does,
// not with store.busy wrapping ErrLeaseLost: the lease was not lost.
func TestCanceledReclaimIsNotALostLease(t *testing.T) {
	testEnv(t)
	s := newLeaseSetup(t, s3fake.StartMoto(t), "wsstore-canceled", 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &cancelAfter{}
	s.rec = newDevice(t, s.m.URL, s.bucket, remote.Options{Now: s.clock.Now, HTTPClient: &http.Client{Transport: tr}})
	var err error
	s.recDev, err = remote.Device(ctx, s.rec.db)
	require.NoError(t, err)
	tr.after = func(r *http.Request) {
		if removal(r) {
			s.clock.Advance(2 * time.Minute) // a renewal is due before the next removal
			cancel()
		}
	}
	_, err = s.rec.st.Reclaim(ctx, s.rec.db, s.recDev, remote.ReclaimOptions{Grace: -1})
	require.Error(t, err)
	assert.NotErrorIs(t, err, remote.ErrLeaseLost, "%v", err)
	assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%v", err)
}

// refusing carries a device's requests to the object store, answering
// with status, as S3 does, those refuse picks.
type refusing struct {
	refuse func(r *http.Request) bool
	status int
}

func (f *refusing) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.refuse != nil && f.refuse(r) {
		code := map[int]string{http.StatusForbidden: "AccessDenied"}[f.status]
		if code == "" {
			code = "ServiceUnavailable"
		}
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>` + http.StatusText(f.status) + `</Message></Error>`
		return &http.Response{StatusCode: f.status, Status: http.StatusText(f.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestRenewalErrorsAreCoded: a renewal of the reclaim lease fails as any
// other request does. Refused (credentials or permissions, 403), the
// reclaim stops with store.invalid_options, as a refused put does: no
// retry helps. Not answered, it stops with store.busy wrapping
// ErrUnavailable. Either way it wraps ErrLeaseLost and removes nothing
// more. Before, a refused renewal was store.busy, to be tried again.
func TestRenewalErrorsAreCoded(t *testing.T) {
	testEnv(t)
	m := s3fake.StartMoto(t)
	for _, tt := range []struct {
		name        string
		status      int
		code        wserr.Code
		unavailable bool
	}{
		{"Refused", http.StatusForbidden, wserr.InvalidOptions, false},
		{"Unanswered", http.StatusServiceUnavailable, wserr.Busy, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newLeaseSetup(t, m, "wsstore-renewal-"+strings.ToLower(tt.name), 0)
			ctx := context.Background()
			leases, removed := 0, 0
			tr := &refusing{status: tt.status}
			tr.refuse = func(r *http.Request) bool {
				if removal(r) {
					removed++
					s.clock.Advance(2 * time.Minute) // a renewal is due before the next removal
				}
				if renewal(r) {
					leases++
				}
				return renewal(r) && leases > 1
			}
			s.rec = newDevice(t, s.m.URL, s.bucket, remote.Options{Now: s.clock.Now, HTTPClient: &http.Client{Transport: tr}})
			var err error
			s.recDev, err = remote.Device(ctx, s.rec.db)
			require.NoError(t, err)
			st, err := s.rec.st.Reclaim(ctx, s.rec.db, s.recDev, remote.ReclaimOptions{Grace: -1})
			t.Logf("%v", err)
			require.ErrorIs(t, err, remote.ErrLeaseLost)
			assert.Equal(t, tt.code, wserr.CodeOf(err))
			assert.Equal(t, tt.unavailable, errors.Is(err, remote.ErrUnavailable))
			assert.Contains(t, err.Error(), "removed nothing more")
			assert.Positive(t, removed, "it removed some first")
			assert.Equal(t, removed, st.Packs+st.Indexes)
			assert.Equal(t, s.objects-removed, len(s.keys(t, "store/data/"))+len(s.keys(t, "store/index/")), "nothing more went")
		})
	}
}
