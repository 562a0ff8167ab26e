package main

import (
	"fmt"
	"sync"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// memStatus is whether SQLite counts its heap in this process: its heap
// limits act on that count, which the driver's build leaves off. It can
// be turned on only before SQLite is first used, so the sql command does
// it as it starts (enableMemStatus), and no other command pays for the
// count on its writes.
var memStatus struct {
	once sync.Once
	err  error // why SQLite does not count its heap, or nil
}

// enableMemStatus turns SQLite's count of its heap on, once, and returns
// why it could not.
func enableMemStatus() error {
	memStatus.once.Do(func() { memStatus.err = configMemStatus() })
	return memStatus.err
}

func configMemStatus() error {
	tls := libc.NewTLS()
	defer tls.Close()
	va := libc.NewVaList(int32(1))
	if va == 0 {
		return fmt.Errorf("SQLite's memory statistics: out of memory")
	}
	defer libc.Xfree(tls, va)
	if rc := sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MEMSTATUS, va); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("SQLite's memory statistics: sqlite3_config returned %d (SQLite was used in this process before)", rc)
	}
	return nil
}

// heapLimitMu is held while a query's heap limit is set: the limit is
// the process's, so two queries in one process take turns.
var heapLimitMu sync.Mutex

// limitSQLiteHeap lets SQLite's heap, process-wide, grow by at most hard
// bytes over what it holds now, an allocation past that failing with
// SQLITE_NOMEM, and has its page caches give back unused pages once it
// has grown by soft; it returns what restores the limits as they were.
func limitSQLiteHeap(soft, hard int64) (restore func(), err error) {
	if err := enableMemStatus(); err != nil {
		return nil, err
	}
	heapLimitMu.Lock()
	tls := libc.NewTLS()
	defer tls.Close()
	used := sqlite3.Xsqlite3_memory_used(tls)
	// The soft limit is read first, as setting the hard one lowers it to
	// that; and set last, SQLite keeping it under the hard one.
	oldSoft := sqlite3.Xsqlite3_soft_heap_limit64(tls, -1)
	oldHard := sqlite3.Xsqlite3_hard_heap_limit64(tls, used+hard)
	sqlite3.Xsqlite3_soft_heap_limit64(tls, used+soft)
	return func() {
		tls := libc.NewTLS()
		defer tls.Close()
		sqlite3.Xsqlite3_hard_heap_limit64(tls, oldHard)
		sqlite3.Xsqlite3_soft_heap_limit64(tls, oldSoft)
		heapLimitMu.Unlock()
	}, nil
}
