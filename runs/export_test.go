package runs

import "context"

// SetPruneGap makes Prune call f between reading a chat's candidates and
// deleting them, and returns what puts the old hook back.
func SetPruneGap(f func()) (restore func()) {
	old := pruneGap
	pruneGap = f
	return func() { pruneGap = old }
}

// SetChatIDPage makes store-wide passes (Prune, EachChatRecord) read n
// chat ids at a time, and returns what puts the old size back.
func SetChatIDPage(n int) (restore func()) {
	old := chatIDPage
	chatIDPage = n
	return func() { chatIDPage = old }
}

// SetRunIDPage makes EachRunRecord read n run ids at a time, and returns
// what puts the old size back.
func SetRunIDPage(n int) (restore func()) {
	old := runIDPage
	runIDPage = n
	return func() { runIDPage = old }
}

// SetCommitSeqPage makes EachCommitRow read n commit seqs at a time, and
// returns what puts the old size back.
func SetCommitSeqPage(n int) (restore func()) {
	old := commitSeqPage
	commitSeqPage = n
	return func() { commitSeqPage = old }
}

// SetPruneReportEntries makes a PruneReport list at most n entries of
// each kind, and returns what puts the old bound back.
func SetPruneReportEntries(n int) (restore func()) {
	old := pruneReportEntries
	pruneReportEntries = n
	return func() { pruneReportEntries = old }
}

// SetChatDeletionRuns makes DeleteChats name at most n runs of a chat,
// and returns what puts the old bound back.
func SetChatDeletionRuns(n int) (restore func()) {
	old := chatDeletionRuns
	chatDeletionRuns = n
	return func() { chatDeletionRuns = old }
}

// SetPrunedCheckpointIDs makes a prune of a run's checkpoints name at
// most n of them, and returns what puts the old bound back.
func SetPrunedCheckpointIDs(n int) (restore func()) {
	old := prunedCheckpointIDs
	prunedCheckpointIDs = n
	return func() { prunedCheckpointIDs = old }
}

// PrunePass runs Prune's deletions without the reclaim after them and
// returns the ids of the deletion-log entries it hands the reclaim and
// how many it logged.
func PrunePass(ctx context.Context, s *Service, opt PruneOptions) (ids []int64, logged int, err error) {
	_, ids, logged, err = s.prunePass(ctx, opt)
	return ids, logged, err
}
