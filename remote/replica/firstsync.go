package replica

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"

	"github.com/wsstore/wsstore/wserr"
)

// Litestream (v0.5.18) reads the database's write-ahead log by itself
// only while it can trust what it finds there; two things it cannot see
// made a replica that no longer restored ("Page N: never used"):
//
//   - A Litestream process goes on from the log offset its last file
//     ends at when the frame before that offset is still the one it
//     shipped, even when the log started over since. A store's process
//     starts the log over whenever every frame of it is in the database
//     file, so frames written after that offset while no replicator ran
//     (one was killed, or stopped between two --once rounds), and whole
//     generations of the log folded back meanwhile, were never shipped,
//     and the transactions shipped after them stood on pages the replica
//     never had. So when the log's salts are not those of the last file
//     Litestream wrote (or it has none the replica's last file follows
//     from), the Replicator writes the whole database as the next file
//     itself (rebase), and Litestream goes on from there.
//   - Litestream's read transaction, which it keeps open to hold
//     checkpoints back, reads the database file only when it begins with
//     every frame of the log in it (SQLite's read mark 0), and such a
//     reader does not keep a writer from starting the log over. Then
//     the frames Litestream has mapped may be overwritten by another
//     transaction's before it reads them: a file of pages from the wrong
//     transactions. No writer can while the log is held still (below);
//     and once a write lands after Litestream's read transaction began, the log
//     cannot start over until Litestream ends it, at its own checkpoints
//     (which write before they let go of the log).
//
// So the first time a process's Litestream looks at the log (it opens
// the database, begins its read transaction and ships what the log holds)
// it does so while the Replicator holds the log still (pinLog): a read
// transaction of its own, begun under the write lock, with a write of the
// Replicator's committed after it. While that transaction is open the log
// cannot start over: it holds a read mark on the log's frames (which no
// writer starts over while a reader uses), or it reads the database file
// only, and then no checkpoint can fold the Replicator's frame back, nor
// any frame after it, which a writer starting the log over needs. The
// whole database, when a rebase is due, is read through that transaction,
// at the log's end when it began; the store's writers go on meanwhile.
// Once Litestream has begun its own read transaction and read the log,
// the Replicator commits another write, so the log cannot start over
// until Litestream ends that transaction either, at its own checkpoints
// (which write before they let go of the log), and lets its own go. The
// write lock is held only to begin the transaction and for the two
// writes; the store's writers wait for those as for any other writer
// (index.Options.BusyTimeout).

// holdBusyTimeout is how long the Replicator waits for the write lock.
const holdBusyTimeout = 30 * time.Second

// logPin is a read transaction under which the log cannot start over,
// on a connection of its own, with the end of the log it reads at.
type logPin struct {
	db      *sql.DB
	read    *sql.Conn // in the read transaction until release
	write   *sql.Conn
	writing bool // write holds the write lock

	salts              [2]uint32 // of the log
	walOffset, walSize int64     // its last committed frame when read began (walEnd)
}

// pinLog begins a logPin on the database at path. The log is given a
// header first (Litestream's start writes one otherwise), and the tables
// Litestream creates at its start are created (writes it need not make
// then). Under the write lock it reads the log's end and begins the read
// transaction; a write of its own then commits after it. Should that
// write start the log over (every frame of it was in the database file,
// and no reader held a mark on it), the read transaction, which read the
// database file alone, is at the start of a log it did not see begin: it
// begins again, at that write's frame this time.
func pinLog(ctx context.Context, path string) (*logPin, error) {
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)", path, holdBusyTimeout.Milliseconds()))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	p := &logPin{db: db}
	if p.write, err = db.Conn(ctx); err == nil {
		p.read, err = db.Conn(ctx)
	}
	if err != nil {
		p.release()
		return nil, err
	}
	for _, q := range []string{
		`PRAGMA journal_mode = wal`,
		`CREATE TABLE IF NOT EXISTS _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER)`,
		`CREATE TABLE IF NOT EXISTS _litestream_lock (id INTEGER)`,
	} {
		if _, err := p.write.ExecContext(ctx, q); err != nil {
			p.release()
			return nil, err
		}
	}
	var pageSize uint32
	if err := p.write.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		p.release()
		return nil, err
	}
	walPath := path + "-wal"
	for range 10 {
		if err := p.begin(ctx); err != nil {
			p.release()
			return nil, err
		}
		if fi, err := os.Stat(walPath); err != nil || fi.Size() < litestream.WALHeaderSize {
			// Another process emptied the log (a checkpoint at its
			// close): a write gives it a header again.
			if err := p.commit(ctx); err != nil {
				p.release()
				return nil, err
			}
			continue
		}
		salts, err := walSalts(walPath)
		if err == nil {
			p.walOffset, p.walSize, err = walEnd(ctx, walPath, pageSize)
		}
		if err == nil {
			_, err = p.read.ExecContext(ctx, `BEGIN`)
		}
		if err == nil {
			_, err = p.read.ExecContext(ctx, `SELECT COUNT(1) FROM _litestream_seq`)
		}
		if err == nil {
			err = p.commit(ctx)
		}
		var now [2]uint32
		if err == nil {
			now, err = walSalts(walPath)
		}
		if err != nil {
			p.release()
			return nil, err
		}
		if now == salts {
			p.salts = salts
			return p, nil
		}
		if _, err := p.read.ExecContext(ctx, `ROLLBACK`); err != nil {
			p.release()
			return nil, err
		}
	}
	p.release()
	return nil, errors.New("the write-ahead log kept starting over")
}

// begin takes the write lock.
func (p *logPin) begin(ctx context.Context) error {
	if _, err := p.write.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return err
	}
	p.writing = true
	return nil
}

// commit writes to Litestream's own table and commits, taking the write
// lock first if it is not held: the log then holds a frame the read
// transactions begun before do not see.
func (p *logPin) commit(ctx context.Context) error {
	if !p.writing {
		if err := p.begin(ctx); err != nil {
			return err
		}
	}
	if _, err := p.write.ExecContext(ctx, `INSERT INTO _litestream_seq (id, seq) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET seq = seq + 1`); err != nil {
		return err
	}
	if _, err := p.write.ExecContext(ctx, `COMMIT`); err != nil {
		return err
	}
	p.writing = false
	return nil
}

// release ends the transactions still open and closes the connections.
func (p *logPin) release() {
	ctx := context.WithoutCancel(context.Background())
	if p.read != nil {
		_, _ = p.read.ExecContext(ctx, `ROLLBACK`) // none open: an error, ignored
		p.read.Close()
	}
	if p.write != nil {
		if p.writing {
			_, _ = p.write.ExecContext(ctx, `ROLLBACK`)
			p.writing = false
		}
		p.write.Close()
	}
	p.db.Close()
}

// firstSync makes Litestream's first sync in this process with the log
// pinned, after a rebase if one is due (see the top of this file).
// Litestream's own monitor is off (Start): a sync before this one would
// read the log unpinned.
func (r *Replicator) firstSync(ctx context.Context) error {
	if r.synced {
		return nil
	}
	last, err := r.db.Replica.MaxLTXFileInfo(ctx, 0)
	if err != nil {
		return unavailable("replicate", r.url, err)
	}
	snapshots, err := listLTX(ctx, r.db.Replica.Client, litestream.SnapshotLevel)
	if err != nil {
		return unavailable("replicate", r.url, err)
	}
	p, err := pinLog(ctx, r.db.Path())
	if err != nil {
		return wserr.Wrap(wserr.Busy, "replicate", r.db.Path(), err)
	}
	defer p.release()
	if err := r.rebase(ctx, p, last.MaxTXID, snapshots); err != nil {
		return err
	}
	// Litestream's checkpoints could fold back nothing past the pin, and
	// its forced one would wait for it and fail: they are left to its next
	// sync (every call of DB.Sync is made under r.mu, so none reads these
	// meanwhile).
	minPages, truncPages, every := r.db.MinCheckpointPageN, r.db.TruncatePageN, r.db.CheckpointInterval
	r.db.MinCheckpointPageN, r.db.TruncatePageN, r.db.CheckpointInterval = math.MaxInt32, math.MaxInt32, 0
	err = r.db.Sync(context.WithoutCancel(ctx)) // see watch
	r.db.MinCheckpointPageN, r.db.TruncatePageN, r.db.CheckpointInterval = minPages, truncPages, every
	if err == nil {
		err = p.commit(context.WithoutCancel(ctx))
	}
	if err != nil {
		return syncError(r.db.Path(), err)
	}
	r.synced = true
	return nil
}

// rebase writes the whole database as the next file of Litestream's
// local state, unless Litestream's last file was cut from the log as it
// is now (the same salts), or neither it nor the replica has any file
// (Litestream's first file is then the whole database). p pins the log
// and the file holds the database as p reads it; remoteMax is the replica's last transaction (level 0) and
// snapshots its snapshots.
//
// The file follows Litestream's last one, and Litestream ships the ones
// the replica lacks before it, when the replica's last transaction is
// among them (a replicator killed before it shipped them) and Litestream
// has not started in this process. Otherwise Litestream's files go (it
// may hold its position from them) and the file follows the replica's
// last transaction; a snapshot past that one, which a killed replicator
// wrote of transactions it never shipped, goes too: a restore would start
// from it and apply to it the transactions shipped from here on.
func (r *Replicator) rebase(ctx context.Context, p *logPin, remoteMax ltx.TXID, snapshots []*ltx.FileInfo) error {
	lmin, lmax, err := r.db.MaxLTX()
	if err != nil {
		return wserr.FromFS("replicate", r.db.Path(), err)
	}
	if lmax == 0 && remoteMax == 0 {
		return nil
	}
	salts := p.salts
	if lmax >= remoteMax {
		// A file that cannot be read is no more to go on from than one
		// cut from another log.
		if was, err := ltxSalts(r.db.LTXPath(0, lmin, lmax)); err == nil && was == salts {
			return nil
		}
	}
	next := lmax + 1
	reset := lmax < remoteMax || r.db.PageSize() != 0
	if reset {
		next = remoteMax + 1
	}
	var ahead []*ltx.FileInfo
	for _, s := range snapshots {
		if s.MaxTXID >= next {
			ahead = append(ahead, s)
		}
	}
	if len(ahead) > 0 {
		if err := r.db.Replica.Client.DeleteLTXFiles(ctx, ahead); err != nil {
			return unavailable("replicate", r.url, err)
		}
	}
	if reset {
		if err := r.db.ResetLocalState(ctx); err != nil {
			return wserr.FromFS("replicate", r.db.Path(), err)
		}
	}
	r.logger.Info("shipping the whole database", "path", r.db.Path(), "txid", next.String())
	if err := writeWhole(ctx, p, r.db.LTXPath(0, next, next), next); err != nil {
		return syncError(r.db.Path(), err)
	}
	return nil
}

// listLTX lists the files of one level of the replica c.
func listLTX(ctx context.Context, c litestream.ReplicaClient, level int) ([]*ltx.FileInfo, error) {
	itr, err := c.LTXFiles(ctx, level, 0, false)
	if err != nil {
		return nil, err
	}
	var infos []*ltx.FileInfo
	for itr.Next() {
		info := *itr.Item()
		infos = append(infos, &info)
	}
	return infos, itr.Close()
}

// walSalts reads the salts in the header of the log at path.
func walSalts(path string) ([2]uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return [2]uint32{}, err
	}
	defer f.Close()
	var hdr [litestream.WALHeaderSize]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return [2]uint32{}, err
	}
	return [2]uint32{binary.BigEndian.Uint32(hdr[16:]), binary.BigEndian.Uint32(hdr[20:])}, nil
}

// ltxSalts reads the log salts in the header of the LTX file at path.
func ltxSalts(path string) ([2]uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return [2]uint32{}, err
	}
	defer f.Close()
	dec := ltx.NewDecoder(f)
	if err := dec.DecodeHeader(); err != nil {
		return [2]uint32{}, err
	}
	return [2]uint32{dec.Header().WALSalt1, dec.Header().WALSalt2}, nil
}

// writeWhole writes every page of the database, as p's read transaction
// reads it, to an LTX file at path for transaction txid. Its header ends
// where the log ended when that transaction began (p), with the log's
// salts: Litestream goes on from there, and finds the last frame before
// it among the file's pages. The pages are read through SQLite
// (sqlite_dbpage), one at a time: the database file is never opened
// beside SQLite's connections, whose locks a close of another descriptor
// of it would drop.
func writeWhole(ctx context.Context, p *logPin, path string, txid ltx.TXID) (err error) {
	conn := p.read
	var pageSize, pageN uint32
	if err := conn.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return err
	}
	if err := conn.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pageN); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		f.Close()
		if err != nil {
			os.Remove(tmp)
		}
	}()
	enc, err := ltx.NewEncoder(f)
	if err != nil {
		return err
	}
	if err := enc.EncodeHeader(ltx.Header{
		Version:   ltx.Version,
		Flags:     ltx.HeaderFlagNoChecksum,
		PageSize:  pageSize,
		Commit:    pageN,
		MinTXID:   txid,
		MaxTXID:   txid,
		Timestamp: time.Now().UnixMilli(),
		WALOffset: p.walOffset,
		WALSize:   p.walSize,
		WALSalt1:  p.salts[0],
		WALSalt2:  p.salts[1],
	}); err != nil {
		return err
	}
	rows, err := conn.QueryContext(ctx, `SELECT pgno, data FROM sqlite_dbpage WHERE pgno <= ?`, pageN)
	if err != nil {
		return err
	}
	defer rows.Close()
	lock := ltx.LockPgno(pageSize)
	var data []byte
	for rows.Next() {
		var pgno uint32
		if err := rows.Scan(&pgno, &data); err != nil {
			return err
		}
		if pgno == lock {
			continue
		}
		if err := enc.EncodePage(ltx.PageHeader{Pgno: pgno}, data); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// walEnd returns the range an LTX file records for the log at path: its
// last committed frame (the log's header alone when it holds none), as
// Litestream's reader of the log finds it.
func walEnd(ctx context.Context, path string, pageSize uint32) (offset, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	rd, err := litestream.NewWALReader(f, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return 0, 0, err
	}
	_, end, _, err := rd.PageMap(ctx)
	if err != nil || end == 0 {
		return litestream.WALHeaderSize, 0, err
	}
	frame := int64(litestream.WALFrameHeaderSize) + int64(pageSize)
	return end - frame, frame, nil
}
