package vault

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	"avfs/wire"
)

// PageSize is the SQLite page size of the vaults and forks this avfs
// makes (Options.PageSize overrides it). An existing vault keeps the page
// size it was made with (SQLite reads any) until `avfs vault upgrade`
// rewrites it.
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
