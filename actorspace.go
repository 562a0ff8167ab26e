package wsstore

import (
	"context"

	"github.com/wsstore/wsstore/actors"
)

// ActorGC is seed 004's Workspace GC: it prunes the old versions of actor
// spaces (actors.Spaces.GC; opt.Actor "" means every actor) and then runs
// the store's GC, which frees the files and trees no root holds any more,
// an actor's live tree and the versions kept included. It fails like the
// two steps it runs; when the prune fails nothing is swept, and the
// prune's report, returned with the error, counts the pages of spaces it
// pruned before it failed.
func (s *Store) ActorGC(ctx context.Context, opt actors.GCOptions, gc GCOptions) (actors.GCReport, GCReport, error) {
	pruned, err := s.Actors.GC(ctx, opt)
	if err != nil {
		return pruned, GCReport{}, err
	}
	rep, err := s.GC(ctx, gc)
	return pruned, rep, err
}
