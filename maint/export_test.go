package maint

import (
	"context"

	"github.com/wsstore/wsstore/index"
)

// SetSpillAfter sets how many objects a work set holds in memory before it
// spills to disk, and returns a function that restores the setting.
func SetSpillAfter(n int) (restore func()) {
	old := spillAfter
	spillAfter = n
	return func() { spillAfter = old }
}

// RootNames returns what m's walks start from, in tx, in the order they
// walk it: each root as messages name it, and the owner du counts it to.
func (m *Maintainer) RootNames(ctx context.Context, tx *index.Tx) ([]RootName, error) {
	var out []RootName
	err := m.eachRoot(ctx, tx, func(r *rootRef) error {
		out = append(out, RootName{Chat: r.Chat, Run: r.Run, Kind: r.Kind, Actor: r.Actor, Seq: r.Seq, Name: r.String(), Owner: r.owner})
		return nil
	})
	return out, err
}

// RootName is a root as RootNames lists it.
type RootName struct {
	Chat, Run, Kind, Actor string
	Seq                    int64
	Name                   string
	Owner                  int64
}
