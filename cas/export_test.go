package cas

// Compressions reports how many times s compressed content.
func Compressions(s *Store) int64 { return s.compressions.Load() }
