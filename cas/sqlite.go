package cas

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/wsstore/wsstore/index"
)

// SQLiteStorage keeps objects in the index's own tables: blobs (with the
// delta-history columns), chunks and blob_chunks, which no other package
// names. It has no state of its own: every call runs in the caller's
// transaction, whose statements the index prepares once per store. It
// implements HistoryStorage, Batcher and UsageStorage.
type SQLiteStorage struct{}

var (
	_ Batcher      = (*SQLiteStorage)(nil)
	_ UsageStorage = (*SQLiteStorage)(nil)
)

// NewSQLiteStorage returns the Storage a Store uses by default.
func NewSQLiteStorage() *SQLiteStorage { return &SQLiteStorage{} }

var _ HistoryStorage = (*SQLiteStorage)(nil)

func table(k Kind) string {
	if k == KindChunk {
		return "chunks"
	}
	return "blobs"
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time { return time.Unix(0, n) }

// nonNil keeps an empty stored form an empty BLOB rather than NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Put stores o, as Storage.Put says.
func (*SQLiteStorage) Put(ctx context.Context, tx *index.Tx, o Object) error {
	if o.Kind == KindChunk {
		_, err := tx.ExecContext(ctx, `INSERT INTO chunks (hash, size, stored, codec, data, created) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (hash) DO UPDATE SET created = max(created, excluded.created)`,
			o.Hash, o.Size, int64(len(o.Data)), int(o.Codec), nonNil(o.Data), nanos(o.Created))
		return index.Translate(err)
	}
	if o.Codec != CodecChunked {
		return putBlobRow(ctx, tx, o, 0)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO blobs (hash, size, stored, codec, data, created) VALUES (?, ?, 0, ?, NULL, ?)
			ON CONFLICT (hash) DO NOTHING`, o.Hash, o.Size, int(CodecChunked), nanos(o.Created))
	if err != nil {
		return index.Translate(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		_, err := touchRow(ctx, tx, "blobs", o.Hash, nanos(o.Created))
		return err
	}
	for i, ref := range o.Chunks {
		if _, err := tx.ExecContext(ctx, `INSERT INTO blob_chunks (blob, idx, chunk, off) VALUES (?, ?, ?, ?)`,
			o.Hash, i, ref.Hash, ref.Off); err != nil {
			return index.Translate(err)
		}
	}
	return nil
}

// putBlobRow inserts a single-row blob at rowid slot (0: where SQLite puts
// a new row), or raises the created time of the row already there.
func putBlobRow(ctx context.Context, tx *index.Tx, o Object, slot Slot) error {
	var err error
	if slot == 0 {
		_, err = tx.ExecContext(ctx, `INSERT INTO blobs (hash, size, stored, codec, base, data, created) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (hash) DO UPDATE SET created = max(created, excluded.created)`,
			o.Hash, o.Size, int64(len(o.Data)), int(o.Codec), o.Base, nonNil(o.Data), nanos(o.Created))
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO blobs (rowid, hash, size, stored, codec, base, data, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (hash) DO UPDATE SET created = max(created, excluded.created)`,
			int64(slot), o.Hash, o.Size, int64(len(o.Data)), int(o.Codec), o.Base, nonNil(o.Data), nanos(o.Created))
	}
	return index.Translate(err)
}

// rawInserter is a storage that inserts a blob row unless one is stored
// at its hash already, reporting which, in one statement.
type rawInserter interface {
	insertRaw(ctx context.Context, tx *index.Tx, o Object) (bool, error)
}

// insertRaw inserts the single-row blob o unless a row holds its hash,
// which it leaves as it is; false when it inserted nothing.
func (*SQLiteStorage) insertRaw(ctx context.Context, tx *index.Tx, o Object) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO blobs (hash, size, stored, codec, base, data, created) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (hash) DO NOTHING`,
		o.Hash, o.Size, int64(len(o.Data)), int(o.Codec), o.Base, nonNil(o.Data), nanos(o.Created))
	if err != nil {
		return false, index.Translate(err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Get calls fn with the object at h, as Storage.Get says. Data is the
// driver's buffer, so a reader that decodes it straight away copies the
// stored bytes no more than once.
func (*SQLiteStorage) Get(ctx context.Context, tx *index.Tx, kind Kind, h Hash, fn func(o Object) error) error {
	q := `SELECT size, stored, codec, base, created, data FROM blobs WHERE hash = ?`
	if kind == KindChunk {
		q = `SELECT size, stored, codec, NULL AS base, created, data FROM chunks WHERE hash = ?`
	}
	rows, err := tx.QueryxContext(ctx, q, h)
	if err != nil {
		return index.Translate(err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return index.Translate(err)
		}
		return notFound("get", h)
	}
	o := Object{Kind: kind, Hash: h}
	var codec int
	var created int64
	var data sql.RawBytes
	if err := rows.Scan(&o.Size, &o.Stored, &codec, &o.Base, &created, &data); err != nil {
		return index.Translate(err)
	}
	o.Codec, o.Created = Codec(codec), fromNanos(created)
	if data != nil {
		o.Data = data
	}
	if kind == KindBlob && o.Codec == CodecChunked {
		// The chunk list is read after the row's cursor is done with.
		if err := rows.Close(); err != nil {
			return index.Translate(err)
		}
		if o.Chunks, err = chunkList(ctx, tx, h); err != nil {
			return err
		}
	}
	if err := fn(o); err != nil {
		return err
	}
	return index.Translate(rows.Close())
}

const chunkListQuery = `SELECT bc.chunk, bc.off, coalesce(c.size, -1) AS size FROM blob_chunks bc
		LEFT JOIN chunks c ON c.hash = bc.chunk WHERE bc.blob = ? ORDER BY bc.idx`

func chunkList(ctx context.Context, tx *index.Tx, h Hash) ([]ChunkRef, error) {
	var refs []ChunkRef
	err := tx.SelectContext(ctx, &refs, chunkListQuery, h)
	return refs, index.Translate(err)
}

// Has reports whether an object of kind is stored at h.
func (*SQLiteStorage) Has(ctx context.Context, tx *index.Tx, kind Kind, h Hash) (bool, error) {
	var one int
	err := tx.GetContext(ctx, &one, `SELECT 1 FROM `+table(kind)+` WHERE hash = ?`, h)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, index.Translate(err)
}

type statRow struct {
	Size    int64 `db:"size"`
	Stored  int64 `db:"stored"`
	Codec   int   `db:"codec"`
	Base    Hash  `db:"base"`
	Created int64 `db:"created"`
}

func (r statRow) object(kind Kind, h Hash) Object {
	return Object{Kind: kind, Hash: h, Size: r.Size, Stored: r.Stored, Codec: Codec(r.Codec), Base: r.Base, Created: fromNanos(r.Created)}
}

// storedSizer is a Storage that reads a blob's stored size without the
// rest of its row (StoredBytes, StoredBytesApart); whole is false when the
// size leaves out a chunked blob's chunks, which the caller then adds.
// The chunks blob apart also lists are left out (a zero apart: none).
type storedSizer interface {
	storedSize(ctx context.Context, tx *index.Tx, h, apart Hash) (n int64, whole bool, err error)
}

// storedSize reads only the columns before a blob row's data: reading
// created, which follows it, walks every overflow page of a large row.
func (*SQLiteStorage) storedSize(ctx context.Context, tx *index.Tx, h, apart Hash) (int64, bool, error) {
	var r struct {
		Stored int64 `db:"stored"`
		Codec  int   `db:"codec"`
	}
	err := tx.GetContext(ctx, &r, `SELECT stored, codec FROM blobs WHERE hash = ?`, h)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, notFound("stat", h)
	}
	if err != nil {
		return 0, false, index.Translate(err)
	}
	if Codec(r.Codec) != CodecChunked {
		return r.Stored, true, nil
	}
	// One aggregate over the chunks, each distinct chunk once (a missing
	// one counts nothing, as in chunkBytes), rather than a lookup a chunk:
	// a 256 MiB file has hundreds.
	var chunks int64
	if apart.IsZero() {
		err = tx.GetContext(ctx, &chunks, `SELECT coalesce(sum(stored), 0) FROM chunks
			WHERE hash IN (SELECT chunk FROM blob_chunks WHERE blob = ?)`, h)
	} else {
		err = tx.GetContext(ctx, &chunks, `SELECT coalesce(sum(stored), 0) FROM chunks
			WHERE hash IN (SELECT chunk FROM blob_chunks WHERE blob = ?)
			AND hash NOT IN (SELECT chunk FROM blob_chunks WHERE blob = ?)`, h, apart)
	}
	if err != nil {
		return 0, false, index.Translate(err)
	}
	return r.Stored + chunks, true, nil
}

// plainSizer is a Storage that reads a blob's plain size without the
// rest of its row (Size).
type plainSizer interface {
	plainSize(ctx context.Context, tx *index.Tx, h Hash) (int64, error)
}

// plainSize reads only the size column, before the row's data.
func (*SQLiteStorage) plainSize(ctx context.Context, tx *index.Tx, h Hash) (int64, error) {
	var n int64
	err := tx.GetContext(ctx, &n, `SELECT size FROM blobs WHERE hash = ?`, h)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return n, index.Translate(err)
}

// Stat returns the object at h without its data.
func (*SQLiteStorage) Stat(ctx context.Context, tx *index.Tx, kind Kind, h Hash) (Object, error) {
	q := `SELECT size, stored, codec, base, created FROM blobs WHERE hash = ?`
	if kind == KindChunk {
		q = `SELECT size, stored, codec, NULL AS base, created FROM chunks WHERE hash = ?`
	}
	var r statRow
	err := tx.GetContext(ctx, &r, q, h)
	if errors.Is(err, sql.ErrNoRows) {
		return Object{}, notFound("stat", h)
	}
	if err != nil {
		return Object{}, index.Translate(err)
	}
	o := r.object(kind, h)
	if kind == KindBlob && o.Codec == CodecChunked {
		if o.Chunks, err = chunkList(ctx, tx, h); err != nil {
			return Object{}, err
		}
	}
	return o, nil
}

// Touch raises the created time of the object at h, leaving a row written
// under TouchSlack ago as it is.
func (*SQLiteStorage) Touch(ctx context.Context, tx *index.Tx, kind Kind, h Hash, now time.Time) (bool, error) {
	return touchRow(ctx, tx, table(kind), h, nanos(now))
}

func touchRow(ctx context.Context, tx *index.Tx, table string, h Hash, now int64) (bool, error) {
	// One statement for what a write meets most: content not stored yet,
	// or stored a moment ago.
	var created int64
	err := tx.GetContext(ctx, &created, `SELECT created FROM `+table+` WHERE hash = ?`, h)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, index.Translate(err)
	}
	if created >= now-int64(TouchSlack) {
		return true, nil
	}
	_, err = tx.ExecContext(ctx, `UPDATE `+table+` SET created = ?1 WHERE hash = ?2 AND created < ?1`, now, h)
	return err == nil, index.Translate(err)
}

// Delete removes the object at h if it is older than cutoff; a chunk that
// a blob lists stays.
func (*SQLiteStorage) Delete(ctx context.Context, tx *index.Tx, kind Kind, h Hash, cutoff time.Time) (int64, bool, error) {
	return scanDeleted(tx.QueryRowContext(ctx, deleteQuery(kind), h, nanos(cutoff)))
}

func deleteQuery(kind Kind) string {
	if kind == KindChunk {
		return `DELETE FROM chunks WHERE hash = ?1 AND created < ?2
		AND NOT EXISTS (SELECT 1 FROM blob_chunks WHERE chunk = ?1) RETURNING stored`
	}
	return `DELETE FROM blobs WHERE hash = ? AND created < ? RETURNING stored`
}

// scanDeleted reads what a delete query's RETURNING clause gave.
func scanDeleted(row *sql.Row) (int64, bool, error) {
	var stored int64
	err := row.Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, index.Translate(err)
	}
	return stored, true, nil
}

// iteratePage is how many rows Iterate reads at a time; fn runs between
// pages, with no cursor open, so it may use the transaction.
const iteratePage = 512

// Iterate calls fn with every object of kind, in hash order.
func (*SQLiteStorage) Iterate(ctx context.Context, tx *index.Tx, kind Kind, fn func(o Object) error) error {
	q := `SELECT hash, size, stored, codec, base, created FROM blobs WHERE hash > ? ORDER BY hash LIMIT ?`
	if kind == KindChunk {
		q = `SELECT hash, size, stored, codec, NULL AS base, created FROM chunks WHERE hash > ? ORDER BY hash LIMIT ?`
	}
	// Every hash sorts after the empty BLOB, so the first page starts at
	// the beginning.
	after := []byte{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := iteratePageRows(ctx, tx, q, kind, after)
		if err != nil {
			return err
		}
		for _, o := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(o); err != nil {
				return err
			}
		}
		if len(page) < iteratePage {
			return nil
		}
		last := page[len(page)-1].Hash
		after = last[:]
	}
}

// iteratePageRows reads one page of Iterate's query. It scans by column,
// not by struct: maintenance inventories every object, and sqlx's
// reflection cost more than SQLite's reading.
func iteratePageRows(ctx context.Context, tx *index.Tx, q string, kind Kind, after []byte) ([]Object, error) {
	rows, err := tx.QueryxContext(ctx, q, after, iteratePage)
	if err != nil {
		return nil, index.Translate(err)
	}
	defer rows.Close()
	page := make([]Object, 0, iteratePage)
	for rows.Next() {
		o := Object{Kind: kind}
		var codec int
		var created int64
		if err := rows.Scan(&o.Hash, &o.Size, &o.Stored, &codec, &o.Base, &created); err != nil {
			return nil, index.TranslateRow("read", "an object row", err) // a value of the wrong type: damage
		}
		o.Codec, o.Created = Codec(codec), fromNanos(created)
		page = append(page, o)
	}
	if err := rows.Err(); err != nil {
		return nil, index.Translate(err)
	}
	return page, index.Translate(rows.Close())
}

// versionCols are what Version reads of a blob's row; versionHeadCols
// the same but the stored bytes.
const (
	versionCols     = `rowid, size, stored, codec, base, created, data, saved, depth, gen, opens IS NOT NULL AS head, opens`
	versionHeadCols = `rowid, size, stored, codec, base, created, NULL AS data, saved, depth, gen, opens IS NOT NULL AS head, opens`
)

// Version returns the blob at h with its history.
func (st *SQLiteStorage) Version(ctx context.Context, tx *index.Tx, h Hash) (Version, error) {
	var v Version
	err := st.lendVersion(ctx, tx, h, true, func(l *Version) error {
		v = *l
		v.Data = cloneData(l.Data)
		return nil
	})
	return v, err
}

// lendVersion calls fn with the blob at h and its history, Data the
// driver's buffer, valid only until fn returns: a caller that decodes it
// there copies the stored bytes no more than once. Without data, Data is
// nil and the stored bytes are not copied at all.
func (*SQLiteStorage) lendVersion(ctx context.Context, tx *index.Tx, h Hash, data bool, fn func(v *Version) error) error {
	q := `SELECT ` + versionCols + ` FROM blobs WHERE hash = ?`
	if !data {
		q = `SELECT ` + versionHeadCols + ` FROM blobs WHERE hash = ?`
	}
	rows, err := tx.QueryxContext(ctx, q, h)
	if err != nil {
		return index.Translate(err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return index.Translate(err)
		}
		return notFound("version", h)
	}
	var r statRow
	var rowid int64
	var stored, opens sql.RawBytes
	v := Version{}
	if err := rows.Scan(&rowid, &r.Size, &r.Stored, &r.Codec, &r.Base, &r.Created, &stored, &v.Saved, &v.Depth, &v.Gen, &v.Head, &opens); err != nil {
		return index.Translate(err)
	}
	v.Object, v.Slot = r.object(KindBlob, h), Slot(rowid)
	if stored != nil {
		v.Data = stored
	}
	if len(opens)%len(Hash{}) != 0 {
		v.Unreadable = true
	} else {
		for i := 0; i < len(opens); i += len(Hash{}) {
			v.Opens = append(v.Opens, Hash(opens[i:i+len(Hash{})]))
		}
	}
	if err := fn(&v); err != nil {
		return err
	}
	return index.Translate(rows.Close())
}

// Reencode replaces the blob row at h with one holding data in codec. The
// row is replaced rather than updated: a new row goes to the end of the
// table, and the old one's deletion lets SQLite merge the page it leaves
// nearly empty; shrinking rows in place would leave the leaves of a
// history's versions mostly empty for good.
func (*SQLiteStorage) Reencode(ctx context.Context, tx *index.Tx, h Hash, codec Codec, base Hash, data []byte) error {
	_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO blobs (hash, size, stored, codec, base, depth, data, created, saved, prevkey, gen, opens)
		SELECT hash, size, ?1, ?2, ?3, depth, ?4, created, saved + stored - ?1, prevkey, gen, opens FROM blobs WHERE hash = ?5`,
		len(data), int(codec), base, nonNil(data), h)
	return index.Translate(err)
}

// PutAt stores the single-row blob o at rowid slot.
func (*SQLiteStorage) PutAt(ctx context.Context, tx *index.Tx, o Object, slot Slot) error {
	return putBlobRow(ctx, tx, o, slot)
}

// moveTo moves the blob row at h to rowid slot, unless a row holds it.
func (*SQLiteStorage) moveTo(ctx context.Context, tx *index.Tx, h Hash, slot Slot) error {
	_, err := tx.ExecContext(ctx, `UPDATE OR IGNORE blobs SET rowid = ? WHERE hash = ?`, int64(slot), h)
	return index.Translate(err)
}

// compressRaw replaces the raw stored form of the blob at h by f,
// leaving its Saved count and row position as they are.
func (*SQLiteStorage) compressRaw(ctx context.Context, tx *index.Tx, h Hash, f storedForm) error {
	_, err := tx.ExecContext(ctx, `UPDATE blobs SET codec = ?, base = ?, stored = ?, data = ? WHERE hash = ? AND codec = 0`,
		int(f.codec), f.base, len(f.data), nonNil(f.data), h)
	return index.Translate(err)
}

// SetHistory records hist on the blob row at h.
func (*SQLiteStorage) SetHistory(ctx context.Context, tx *index.Tx, h Hash, hist History, created time.Time) error {
	// A zero-length BLOB, not NULL, marks the head of a history with
	// nothing open.
	var opens any
	if hist.Head {
		list := make([]byte, 0, len(hist.Opens)*len(Hash{}))
		for _, o := range hist.Opens {
			list = append(list, o[:]...)
		}
		opens = list
	}
	_, err := tx.ExecContext(ctx, `UPDATE blobs SET gen = ?, opens = ?, created = max(created, ?) WHERE hash = ?`,
		hist.Gen, opens, nanos(created), h)
	return index.Translate(err)
}

// cloneData copies the stored form out of a Get callback's buffer.
func cloneData(b []byte) []byte {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}

// Gens lists the history numbers of the blobs in a history. They are read
// whole before fn runs, so fn may use tx.
func (*SQLiteStorage) Gens(ctx context.Context, tx *index.Tx, fn func(h Hash, gen int64) error) error {
	var rows []struct {
		Hash Hash  `db:"hash"`
		Gen  int64 `db:"gen"`
	}
	if err := tx.SelectContext(ctx, &rows, `SELECT hash, gen FROM blobs WHERE gen > 0`); err != nil {
		return index.Translate(err)
	}
	for _, r := range rows {
		if err := fn(r.Hash, r.Gen); err != nil {
			return err
		}
	}
	return nil
}

// Usage totals the rows with one aggregate query per table.
func (*SQLiteStorage) Usage(ctx context.Context, tx *index.Tx) (Usage, error) {
	var u Usage
	var rows []struct {
		Codec  int   `db:"codec"`
		Blobs  int64 `db:"blobs"`
		Size   int64 `db:"size"`
		Stored int64 `db:"stored"`
		Saved  int64 `db:"saved"`
	}
	err := tx.SelectContext(ctx, &rows, `SELECT codec, count(*) AS blobs, coalesce(sum(size), 0) AS size,
		coalesce(sum(stored), 0) AS stored, coalesce(sum(saved), 0) AS saved FROM blobs GROUP BY codec ORDER BY codec`)
	if err != nil {
		return Usage{}, index.TranslateRow("read", "blob usage", err) // a codec that does not scan: damage
	}
	for _, r := range rows {
		u.ByCodec = append(u.ByCodec, CodecUsage{Codec: Codec(r.Codec), Blobs: r.Blobs, Size: r.Size, Stored: r.Stored, Saved: r.Saved})
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(stored), 0) FROM chunks`).Scan(&u.Chunks, &u.ChunksStored); err != nil {
		return Usage{}, fmt.Errorf("chunk usage: %w", index.Translate(err))
	}
	return u, nil
}

// Batch returns a batch whose statements are prepared in tx on first use
// and reused for every later call.
func (*SQLiteStorage) Batch(ctx context.Context, tx *index.Tx) (Batch, error) {
	return &sqliteBatch{tx: tx, stmts: map[string]*sqlx.Stmt{}}, nil
}

type sqliteBatch struct {
	tx    *index.Tx
	stmts map[string]*sqlx.Stmt
}

func (b *sqliteBatch) stmt(ctx context.Context, query string) (*sqlx.Stmt, error) {
	if st, ok := b.stmts[query]; ok {
		return st, nil
	}
	st, err := b.tx.PreparexContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", index.Translate(err))
	}
	b.stmts[query] = st
	return st, nil
}

func (b *sqliteBatch) Stat(ctx context.Context, kind Kind, h Hash) (Object, error) {
	q := `SELECT size, stored, codec, base, created FROM blobs WHERE hash = ?`
	if kind == KindChunk {
		q = `SELECT size, stored, codec, NULL AS base, created FROM chunks WHERE hash = ?`
	}
	st, err := b.stmt(ctx, q)
	if err != nil {
		return Object{}, err
	}
	var r statRow
	err = st.GetContext(ctx, &r, h)
	if errors.Is(err, sql.ErrNoRows) {
		return Object{}, notFound("stat", h)
	}
	if err != nil {
		return Object{}, index.Translate(err)
	}
	o := r.object(kind, h)
	if kind == KindBlob && o.Codec == CodecChunked {
		st, err := b.stmt(ctx, chunkListQuery)
		if err != nil {
			return Object{}, err
		}
		if err := st.SelectContext(ctx, &o.Chunks, h); err != nil {
			return Object{}, index.Translate(err)
		}
	}
	return o, nil
}

func (b *sqliteBatch) Gen(ctx context.Context, h Hash) (int64, error) {
	st, err := b.stmt(ctx, `SELECT gen FROM blobs WHERE hash = ?`)
	if err != nil {
		return 0, err
	}
	var gen int64
	err = st.QueryRowContext(ctx, h).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound("gen", h)
	}
	return gen, index.Translate(err)
}

func (b *sqliteBatch) Delete(ctx context.Context, kind Kind, h Hash, cutoff time.Time) (int64, bool, error) {
	st, err := b.stmt(ctx, deleteQuery(kind))
	if err != nil {
		return 0, false, err
	}
	return scanDeleted(st.QueryRowContext(ctx, h, nanos(cutoff)))
}

func (b *sqliteBatch) Close() error {
	var first error
	for _, st := range b.stmts {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
	}
	b.stmts = nil
	return first
}

// Referenced is ReferenceStorage.Referenced: one lookup in the index on
// blobs.base or on blob_chunks.chunk.
func (*SQLiteStorage) Referenced(ctx context.Context, tx *index.Tx, kind Kind, h Hash) (bool, error) {
	q := `SELECT EXISTS (SELECT 1 FROM blobs WHERE base = ?)`
	if kind == KindChunk {
		q = `SELECT EXISTS (SELECT 1 FROM blob_chunks WHERE chunk = ?)`
	}
	var ok bool
	if err := tx.QueryRowContext(ctx, q, h[:]).Scan(&ok); err != nil {
		return false, fmt.Errorf("references of %s %s: %w", kind, h.Short(), index.Translate(err))
	}
	return ok, nil
}

// HoldsObjects reports whether the store's own tables (SQLiteStorage)
// hold any blob or chunk: contents a Store over another Storage, such as
// a remote tier, would not see.
func HoldsObjects(ctx context.Context, db *index.DB) (bool, error) {
	var held bool
	err := db.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &held, `SELECT EXISTS (SELECT 1 FROM blobs) OR EXISTS (SELECT 1 FROM chunks)`)
	})
	return held, index.Translate(err)
}
