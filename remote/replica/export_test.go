package replica

import "context"

// SnapshotNow writes a snapshot of r's database to the replica, as
// Litestream's snapshot pass does.
func SnapshotNow(ctx context.Context, r *Replicator) error {
	_, err := r.db.Snapshot(ctx)
	return err
}
