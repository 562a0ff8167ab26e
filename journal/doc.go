// Package journal implements the append-only event log of agent runs.
//
// It owns the events table: no other package reads or writes it, and
// every other part reaches a run's events through Append (or Prepare and
// AppendEntries, which write a change's events two to a statement), Page,
// Export and Follow.
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
//     decode any event's payload into a struct or a map. Readers get back
//     the exact bytes Append returned, however the payload is stored.
//   - Timestamps come from the clock given to New, in UTC, stored as Unix
//     nanoseconds.
//
// Readers page by seq (Page), stream a run as events.jsonl (Export) or
// follow a live run by polling (Follow). None of them needs a write
// transaction; they read the last committed state from the read pool.
//
// # Stored payloads
//
// Append stores a payload packed (packed.go), as a BLOB in the events
// table's payload column: its JSON text in which every quoted string of 64
// lowercase hex digits (a content address) becomes a marker byte and its
// 32 raw bytes, and the keys and common values of the store's own payloads
// become one-byte codes from a fixed table. Hashes are most of a typical
// payload, so a run's payloads take about half the space of their JSON. A
// general-purpose compressor would gain little on objects of a couple of
// hundred bytes each, and would cost a dependency and the ability to read
// a payload without its neighbours.
//
// Every code is a byte below 0x20, which compact JSON never contains raw,
// so the first byte of a stored value tells the two forms apart: JSON text
// (every row written before packing existed, which reads exactly as before,
// with no migration) or a format byte. Packing works on bytes, not on
// parsed JSON, scanning left to right and always taking the longest
// substitution: it needs no parser, it is deterministic, and unpacking
// gives back exactly the bytes that were packed, for any input (a fuzz
// test holds it to that). So Page, Export and Follow return the same JSON
// that Append returned. A payload that packing would not shorten, such as
// "{}", is stored as JSON text. A packed payload that does not unpack (an
// unknown format, a truncated hash) reads as store.corrupt naming its run
// and seq, never as other JSON. The code table is part of format 1 and
// never changes; another table needs another format byte.
//
// Because packed payloads are not JSON to SQLite, the package registers
// the SQL function payload_json(payload), which returns the JSON text of a
// stored payload of either form:
//
//	SELECT json_extract(payload_json(payload), '$.path') FROM events
//
// The sqlite driver keeps functions per process and adds them to each
// connection it opens, so the package registers it in an init function:
// it is then there before any store can be opened, on every connection,
// including the read-only one of wsctl sql. Tools that do not link this
// package, such as the sqlite3 shell, see packed payloads as BLOBs.
package journal
