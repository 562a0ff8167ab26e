package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// Method names a Storage method, to choose the calls a Fault fails.
type Method string

// The methods of cas.Storage and cas.HistoryStorage.
const (
	Put        Method = "Put"
	Get        Method = "Get"
	Has        Method = "Has"
	Stat       Method = "Stat"
	Touch      Method = "Touch"
	Delete     Method = "Delete"
	Iterate    Method = "Iterate"
	Version    Method = "Version"
	Reencode   Method = "Reencode"
	PutAt      Method = "PutAt"
	SetHistory Method = "SetHistory"
	Gens       Method = "Gens"
)

// ErrInjected is the error a Fault without Err fails with.
var ErrInjected = errors.New("storagetest: injected fault")

// Call is one call the wrapper sees, for a Fault's predicate.
type Call struct {
	Method Method
	Kind   cas.Kind
	Hash   cas.Hash // zero for Iterate and Gens
	// N counts the calls of Method the wrapper has seen, this one
	// included.
	N int
}

// Fault chooses calls to fail and says how. A call matches when its
// method is Method (any method if empty) and When, if set, returns true.
type Fault struct {
	Method Method
	When   func(Call) bool
	// Nth fails only the Nth matching call from when the fault was added
	// (1: the next one); 0 fails every matching call.
	Nth int
	// Err is what the call returns, wrapped so errors.Is finds it;
	// default ErrInjected.
	Err error
	// After makes the call go through to the wrapped storage first and
	// fail afterwards, as a write whose answer was lost does.
	After bool
	// Corrupt, for Get and Version, fails nothing: the call returns
	// Corrupt's result in place of the stored Data (a copy is passed in).
	Corrupt func(data []byte) []byte
	// Short, for Put and PutAt, makes a write cut short: the first half
	// of the object's Data goes through to the wrapped storage, then the
	// call fails with Err, default io.ErrShortWrite.
	Short bool
}

type armed struct {
	Fault
	seen int
}

// Faults holds the faults a wrapper injects and counts the calls it sees.
// It is safe for concurrent use; faults may be added while calls run.
type Faults struct {
	mu     sync.Mutex
	faults []*armed
	calls  map[Method]int
	fired  int
}

// Add arms f.
func (fs *Faults) Add(f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.faults = append(fs.faults, &armed{Fault: f})
}

// Fail arms a fault that fails the nth call of m from now (every call for
// 0) with ErrInjected.
func (fs *Faults) Fail(m Method, nth int) { fs.Add(Fault{Method: m, Nth: nth}) }

// Clear disarms every fault; the call counts stay.
func (fs *Faults) Clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.faults = nil
}

// Calls returns how many calls of m the wrapper has seen.
func (fs *Faults) Calls(m Method) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.calls[m]
}

// Fired returns how many calls a fault has failed or corrupted.
func (fs *Faults) Fired() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.fired
}

// match counts the call and returns the fault it triggers, if any.
func (fs *Faults) match(m Method, kind cas.Kind, h cas.Hash) *Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.calls == nil {
		fs.calls = map[Method]int{}
	}
	fs.calls[m]++
	c := Call{Method: m, Kind: kind, Hash: h, N: fs.calls[m]}
	for _, f := range fs.faults {
		if (f.Method != "" && f.Method != m) || (f.When != nil && !f.When(c)) {
			continue
		}
		if f.Corrupt != nil && m != Get && m != Version {
			continue
		}
		f.seen++
		if f.Nth == 0 || f.seen == f.Nth {
			fs.fired++
			fault := f.Fault
			return &fault
		}
	}
	return nil
}

func (f *Fault) err(m Method, h cas.Hash) error {
	err := f.Err
	if err == nil {
		err = ErrInjected
	}
	return fmt.Errorf("%s %s: %w", m, h.Short(), err)
}

// NewFaulty wraps s so that the faults armed on the returned Faults fail
// its calls. The wrapper has s's HistoryStorage ability exactly when s
// has it, and none of s's other optional abilities (cas.Batcher,
// cas.UsageStorage), so every call the Store makes goes through a method
// a fault can fail. With no fault armed it behaves as s does.
func NewFaulty(s cas.Storage) (cas.Storage, *Faults) {
	fs := &Faults{}
	f := &faulty{inner: s, fs: fs}
	if hs, ok := s.(cas.HistoryStorage); ok {
		return &faultyHistory{faulty: f, hist: hs}, fs
	}
	return f, fs
}

type faulty struct {
	inner cas.Storage
	fs    *Faults
}

// do runs call unless a fault fails it, before or after.
func (f *faulty) do(m Method, kind cas.Kind, h cas.Hash, call func() error) error {
	fault := f.fs.match(m, kind, h)
	if fault == nil || fault.Corrupt != nil {
		return call()
	}
	if fault.After {
		if err := call(); err != nil {
			return err
		}
	}
	return fault.err(m, h)
}

func (f *faulty) Put(ctx context.Context, tx *index.Tx, o cas.Object) error {
	put := func(o cas.Object) error { return f.inner.Put(ctx, tx, o) }
	return f.doPut(Put, o, put)
}

// doPut runs put as do runs a call, and cuts it short for a Short fault.
func (f *faulty) doPut(m Method, o cas.Object, put func(cas.Object) error) error {
	fault := f.fs.match(m, o.Kind, o.Hash)
	switch {
	case fault == nil || fault.Corrupt != nil:
		return put(o)
	case fault.Short:
		return fault.short(m, o, put)
	case fault.After:
		if err := put(o); err != nil {
			return err
		}
	}
	return fault.err(m, o.Hash)
}

// short makes the write of o that fault cuts short: half of its data
// through put, then the fault's error.
func (fault *Fault) short(m Method, o cas.Object, put func(cas.Object) error) error {
	half := o
	half.Data = o.Data[:len(o.Data)/2]
	if err := put(half); err != nil {
		return err
	}
	if fault.Err == nil {
		return fmt.Errorf("%s %s: %w", m, o.Hash.Short(), io.ErrShortWrite)
	}
	return fault.err(m, o.Hash)
}

func (f *faulty) Get(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash, fn func(o cas.Object) error) error {
	fault := f.fs.match(Get, kind, h)
	switch {
	case fault == nil:
		return f.inner.Get(ctx, tx, kind, h, fn)
	case fault.Corrupt != nil:
		return f.inner.Get(ctx, tx, kind, h, func(o cas.Object) error {
			o.Data = fault.Corrupt(bytes.Clone(o.Data))
			return fn(o)
		})
	case fault.After:
		if err := f.inner.Get(ctx, tx, kind, h, fn); err != nil {
			return err
		}
	}
	return fault.err(Get, h)
}

func (f *faulty) Has(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash) (ok bool, err error) {
	err = f.do(Has, kind, h, func() error {
		ok, err = f.inner.Has(ctx, tx, kind, h)
		return err
	})
	return ok && err == nil, err
}

func (f *faulty) Stat(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash) (o cas.Object, err error) {
	err = f.do(Stat, kind, h, func() error {
		o, err = f.inner.Stat(ctx, tx, kind, h)
		return err
	})
	if err != nil {
		return cas.Object{}, err
	}
	return o, nil
}

func (f *faulty) Touch(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash, now time.Time) (ok bool, err error) {
	err = f.do(Touch, kind, h, func() error {
		ok, err = f.inner.Touch(ctx, tx, kind, h, now)
		return err
	})
	return ok && err == nil, err
}

func (f *faulty) Delete(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash, cutoff time.Time) (stored int64, deleted bool, err error) {
	err = f.do(Delete, kind, h, func() error {
		stored, deleted, err = f.inner.Delete(ctx, tx, kind, h, cutoff)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return stored, deleted, nil
}

func (f *faulty) Iterate(ctx context.Context, tx *index.Tx, kind cas.Kind, fn func(o cas.Object) error) error {
	return f.do(Iterate, kind, cas.Hash{}, func() error { return f.inner.Iterate(ctx, tx, kind, fn) })
}

var _ cas.HistoryStorage = (*faultyHistory)(nil)

type faultyHistory struct {
	*faulty
	hist cas.HistoryStorage
}

func (f *faultyHistory) Version(ctx context.Context, tx *index.Tx, h cas.Hash) (v cas.Version, err error) {
	fault := f.fs.match(Version, cas.KindBlob, h)
	if fault == nil || fault.Corrupt != nil || fault.After {
		v, err = f.hist.Version(ctx, tx, h)
		if err != nil {
			return cas.Version{}, err
		}
	}
	switch {
	case fault == nil:
		return v, nil
	case fault.Corrupt != nil:
		v.Data = fault.Corrupt(bytes.Clone(v.Data))
		return v, nil
	}
	return cas.Version{}, fault.err(Version, h)
}

func (f *faultyHistory) Reencode(ctx context.Context, tx *index.Tx, h cas.Hash, codec cas.Codec, base cas.Hash, data []byte) error {
	return f.do(Reencode, cas.KindBlob, h, func() error { return f.hist.Reencode(ctx, tx, h, codec, base, data) })
}

func (f *faultyHistory) PutAt(ctx context.Context, tx *index.Tx, o cas.Object, slot cas.Slot) error {
	return f.doPut(PutAt, o, func(o cas.Object) error { return f.hist.PutAt(ctx, tx, o, slot) })
}

func (f *faultyHistory) SetHistory(ctx context.Context, tx *index.Tx, h cas.Hash, hist cas.History, created time.Time) error {
	return f.do(SetHistory, cas.KindBlob, h, func() error { return f.hist.SetHistory(ctx, tx, h, hist, created) })
}

func (f *faultyHistory) Gens(ctx context.Context, tx *index.Tx, fn func(h cas.Hash, gen int64) error) error {
	return f.do(Gens, cas.KindBlob, cas.Hash{}, func() error { return f.hist.Gens(ctx, tx, fn) })
}
