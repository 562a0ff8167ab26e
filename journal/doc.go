// Package journal implements the append-only event log of agent runs.
//
// Every run has its own sequence of events numbered from 1 without gaps.
// An event is appended in the same write transaction as the change it
// records, so a crash leaves both or neither, and a transaction that rolls
// back takes its events with it: the next append reuses the freed seq, and
// the sequence stays gapless. Appending reads the run's highest seq through
// the primary key (run_id, seq), so it costs the same at event 1,000,000 as
// at event 1.
//
// Guarantees:
//   - Events are never updated. The only deletion is DeleteRun, which
//     removes a whole run's journal when the run itself is deleted; there is
//     no API to change or remove a single event.
//   - The vocabulary is closed: Append refuses a Type that is not one of the
//     package's constants and a Level that is not Debug, Info, Warn or Error.
//   - A payload is always a JSON object ("{}" when empty), so a reader can
//     decode any event's payload into a struct or a map.
//   - Timestamps come from the clock given to New, in UTC, stored as Unix
//     nanoseconds.
//
// Readers page by seq (Page), stream a run as events.jsonl (Export) or
// follow a live run by polling (Follow). None of them needs a write
// transaction; they read the last committed state from the read pool.
package journal
