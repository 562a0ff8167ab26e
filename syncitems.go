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

// newBroughtBytes returns an empty list of sp for a broughtList. Tests
// wrap it to inject failures.
var newBroughtBytes = func(sp *index.Spill) byteList { return sp.NewList() }

// broughtList holds what the archive of a segment taken in brought: the
// names of what it added and of what it brought forward, in the order
// the import settled them, and then their states here, in memory up to
// itemSpillAfter of each and in a scratch database beyond (index.Spill),
// so that taking in a base holds a page of its items however many it
// brings. Close it when done.
type broughtList struct {
	spill                 *index.Spill
	added, updated, items byteList
}

func newBroughtList(ctx context.Context) *broughtList {
	sp := index.NewSpill(ctx, itemSpillAfter)
	return &broughtList{spill: sp, added: newBroughtBytes(sp), updated: newBroughtBytes(sp), items: newBroughtBytes(sp)}
}

// push appends name to the names added (added) or brought forward.
func (l *broughtList) push(name string, added bool) error {
	list := l.updated
	if added {
		list = l.added
	}
	if err := list.Push([]byte(name)); err != nil {
		return fmt.Errorf("sync: list what a segment brought: %w", err)
	}
	return nil
}

// eachName calls fn with every name pushed, those added first, and
// whether it was added.
func (l *broughtList) eachName(fn func(name string, added bool) error) error {
	for _, list := range []byteList{l.added, l.updated} {
		for i := range list.Len() {
			b, err := list.At(i)
			if err != nil {
				return fmt.Errorf("sync: list what a segment brought: %w", err)
			}
			if err := fn(string(b), list == l.added); err != nil {
				return err
			}
		}
	}
	return nil
}

// eachPage calls fn with the names pushed, itemPage at a time, in
// eachName's order.
func (l *broughtList) eachPage(fn func(names []string) error) error {
	page := make([]string, 0, itemPage)
	if err := l.eachName(func(name string, _ bool) error {
		if page = append(page, name); len(page) < itemPage {
			return nil
		}
		err := fn(page)
		page = page[:0]
		return err
	}); err != nil {
		return err
	}
	if len(page) == 0 {
		return nil
	}
	return fn(page)
}

// pushItem appends it to the states.
func (l *broughtList) pushItem(it remote.Item) error {
	b, err := json.Marshal(it)
	if err != nil {
		return err
	}
	if err := l.items.Push(b); err != nil {
		return fmt.Errorf("sync: list what a segment brought: %w", err)
	}
	return nil
}

// eachItem calls fn with every state pushed, in order.
func (l *broughtList) eachItem(fn func(it remote.Item) error) error {
	for i := range l.items.Len() {
		b, err := l.items.At(i)
		if err != nil {
			return fmt.Errorf("sync: list what a segment brought: %w", err)
		}
		var it remote.Item
		if err := json.Unmarshal(b, &it); err != nil {
			return fmt.Errorf("sync: list what a segment brought: %w", err)
		}
		if err := fn(it); err != nil {
			return err
		}
	}
	return nil
}

// Close removes the scratch database, if the list spilled to one.
func (l *broughtList) Close() error { return l.spill.Close() }
