package wsstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
)

// itemSpillAfter is how many items of a kind an itemList holds in memory
// before it moves them to a scratch database on disk. Tests lower it.
var itemSpillAfter = itemPage

// itemKinds is the order of the kinds in an itemList: name order.
var itemKinds = []string{"actor", "chat", "run"}

// itemList holds the items a segment carries in name order, in memory
// up to itemSpillAfter of each kind and in a scratch database beyond
// (index.Spill), so that a first sync or a base holds a page of them
// however many the store has. Push the items of a kind in id order; Close
// the list when done.
type itemList struct {
	spill *index.Spill
	kinds map[string]byteList
}

// byteList is what an itemList keeps the items of a kind in: an
// index.SpillList.
type byteList interface {
	Push(b []byte) error
	Len() int64
	At(i int64) ([]byte, error)
}

// newByteList returns an empty list of sp. Tests wrap it to inject
// failures.
var newByteList = func(sp *index.Spill) byteList { return sp.NewList() }

// listedItem is an item as an itemList holds it: New says the item was
// never synced.
type listedItem struct {
	remote.Item
	New bool
}

func newItemList(ctx context.Context) *itemList {
	l := &itemList{spill: index.NewSpill(ctx, itemSpillAfter), kinds: map[string]byteList{}}
	for _, k := range itemKinds {
		l.kinds[k] = newByteList(l.spill)
	}
	return l
}

// push appends it, of a kind the list holds, after the items of its kind
// pushed before, whose ids are lower.
func (l *itemList) push(it remote.Item, isNew bool) error {
	k, ok := l.kinds[it.Kind]
	if !ok {
		return fmt.Errorf("sync: an item of kind %q", it.Kind)
	}
	b, err := json.Marshal(listedItem{it, isNew})
	if err != nil {
		return err
	}
	if err := k.Push(b); err != nil {
		return fmt.Errorf("sync: list the items: %w", err)
	}
	return nil
}

// len returns how many items the list holds.
func (l *itemList) len() int64 {
	var n int64
	for _, k := range l.kinds {
		n += k.Len()
	}
	return n
}

// each calls fn with every item in name order, and whether it was never
// synced.
func (l *itemList) each(fn func(it remote.Item, isNew bool) error) error {
	for _, kind := range itemKinds {
		k := l.kinds[kind]
		for i := range k.Len() {
			b, err := k.At(i)
			if err != nil {
				return fmt.Errorf("sync: list the items: %w", err)
			}
			var it listedItem
			if err := json.Unmarshal(b, &it); err != nil {
				return fmt.Errorf("sync: list the items: %w", err)
			}
			if err := fn(it.Item, it.New); err != nil {
				return err
			}
		}
	}
	return nil
}

// eachItem is each for a caller that needs not know which are new.
func (l *itemList) eachItem(fn func(it remote.Item) error) error {
	return l.each(func(it remote.Item, _ bool) error { return fn(it) })
}

// Close removes the scratch database, if the list spilled to one.
func (l *itemList) Close() error { return l.spill.Close() }
