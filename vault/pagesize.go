package vault

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	"avfs/wire"
)

// PageSize is the SQLite page size of the vaults and forks this avfs
// makes (Options.PageSize overrides it): SQLite's default, 4 KiB, chosen
// on these figures (tests/bench section 15-pagesize, docs/benchmarks.md;
// 2 CPUs, two runs of 3 rounds, the page sizes in turns):
//
//   - Storing 100 MiB as 64 KiB chunk blobs gains from big pages, but
//     less than it seemed: write plus the checkpoint at close, one
//     transaction, 0.70 / 0.67 / 0.59 / 0.57 s at 4 / 16 / 32 / 64 KiB
//     (4 MiB transactions: 0.79 / 0.63 / 0.79 / 0.55 s), and the second
//     run (a loaded machine) kept the order within noise. What big pages
//     save is system calls (27,500 writes and 25,900 reads at 4 KiB,
//     3,800 and 1,800 at 64 KiB), not bytes: the checkpoint reads the
//     100 MiB back from the log at every page size.
//   - Every small transaction gets dearer: the log holds whole pages, so
//     a file create that touches a handful of pages logs 16 times the
//     bytes at 64 KiB. 10,000 WriteFile calls of 100–2,000 bytes took
//     3.0 / 4.9 / 13.1 / 16.5 s (second run: 10.5 / 13.9 / 20.6 / 35.4
//     s): creating small files is what a mount does most.
//   - Reads, metadata queries and space do not decide it: cold reads of
//     the 100 MiB 98 ms at 4 KiB against 122 ms at 64 KiB, Stat, List
//     and Diff within noise of each other, and a vault of those 10,000
//     files 17.2 / 15.9 / 16.1 / 16.8 MiB.
//
// The cost a big page would have saved on a large write, the checkpoint
// in the commit, moves off the write path instead (StartCheckpointer).
// Should another page size be chosen, existing vaults keep theirs (SQLite
// reads any; the inline checkpoint is sized in bytes, see
// walAutoCheckpointBytes) and a rewrite of the file (VACUUM INTO with the
// new page_size) would convert them.
const PageSize = 4096

// pageSizeOf returns the page size a new vault made with opts gets, or
// invalid_input when opts asks for one SQLite does not have (a power of
// two from 512 to 65536).
func pageSizeOf(opts Options) (int, error) {
	n := opts.PageSize
	if n == 0 {
		return PageSize, nil
	}
	if n < 512 || n > 65536 || n&(n-1) != 0 {
		return 0, wire.Errorf(wire.CodeInvalidInput, "page size %d: SQLite pages are a power of two from 512 to 65536 bytes", n)
	}
	return n, nil
}

// formatEmpty gives the empty file at path its page size and
// auto_vacuum=INCREMENTAL, and switches it to WAL, writing its first page.
// It must run before any vault connection touches the file: the writers'
// DSN turns on WAL, and once a file is in WAL mode its page size is fixed
// (SQLite changes it only by a VACUUM outside WAL).
func formatEmpty(ctx context.Context, path string, pageSize int) error {
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath())
	if err != nil {
		return storageErr("create vault", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d; PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_mode = WAL", pageSize)); err != nil {
		return storageErr("create vault", err)
	}
	var got int
	if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&got); err != nil {
		return storageErr("create vault", err)
	}
	if got != pageSize {
		return wire.Errorf(wire.CodeInternal, "create vault: page size %d was asked for, SQLite made %d", pageSize, got)
	}
	return nil
}
