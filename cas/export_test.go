package cas

import "context"

// Compressions reports how many times s compressed content.
func Compressions(s *Store) int64 { return s.compressions.Load() }

// Hashes reports how many times s hashed content it was given to store.
func Hashes(s *Store) int64 { return s.hashes.Load() }

// Decodes reports how many times s decompressed a whole blob.
func Decodes(s *Store) int64 { return s.decodes.Load() }

// ChunkReads reports how many chunks s read.
func ChunkReads(s *Store) int64 { return s.chunkReads.Load() }

// DictLoads counts the dictionaries s read from storage and built codecs for.
func DictLoads(s *Store) int64 { return s.dictLoads.Load() }

// StalePlans reports how many queued re-encodings s had to plan again in
// their write transaction.
func StalePlans(s *Store) int64 { return s.stalePlans.Load() }

// SetPlanned makes fn run between each queued re-encoding's plan and its
// write transaction.
func SetPlanned(s *Store, fn func()) { s.planned = fn }

// SetTrainPlanned makes fn run between a background training's building
// and its listing.
func SetTrainPlanned(s *Store, fn func()) { s.trainPlanned = fn }

// TrainAside trains as the background runner does: built in a read
// transaction, listed in a write transaction of its own.
func TrainAside(ctx context.Context, s *Store) (bool, error) { return s.trainAside(ctx) }
