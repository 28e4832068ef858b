package vault

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
)

// stmtCache prepares each query once per database handle; database/sql
// then keeps one prepared statement per connection.
//
// The writers' cache also owns the connection every write transaction of
// this process runs on (see begin). Keeping writes on one connection keeps
// its page cache valid from one transaction to the next: SQLite drops a
// connection's cache whenever another connection committed, which made
// every read after a write re-read the pages it touched from the WAL.
// Single reads run on that connection too when no transaction holds it
// (see readRow), so that they also find the pages warm.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt

	connMu    sync.Mutex // held by the transaction or read using conn
	conn      *sql.Conn  // opened by the first write transaction
	connStmts map[string]*sql.Stmt
	wc        writeCache // what conn knows after its last commit
	closed    bool
}

func newStmtCache(db *sql.DB) *stmtCache { return &stmtCache{db: db, m: map[string]*sql.Stmt{}} }

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.m[query] = st
	return st, nil
}

func (c *stmtCache) close() {
	c.connMu.Lock()
	for _, st := range c.connStmts {
		st.Close()
	}
	c.connStmts = nil
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	c.closed = true
	c.connMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// begin starts a BEGIN IMMEDIATE transaction on the writers' own
// connection, waiting for the transaction of another goroutine to end
// first. done must be called after the transaction ended (q.Commit, or
// q.Rollback, which is harmless after a commit).
//
// The transaction is begun by hand on the connection, not with
// database/sql's BeginTx: a *sql.Tx starts a goroutine per transaction, and
// one more per query, to watch for cancellation, and waking them cost more
// than the SQL of a small write in a busy mount. mattn/go-sqlite3 still
// interrupts a statement whose context is cancelled.
func (c *stmtCache) begin(ctx context.Context) (q cq, done func(), err error) {
	c.connMu.Lock()
	if c.closed {
		c.connMu.Unlock()
		return cq{}, nil, sql.ErrConnDone
	}
	for attempt := 0; ; attempt++ {
		if c.conn == nil {
			if c.conn, err = c.db.Conn(ctx); err != nil {
				c.connMu.Unlock()
				return cq{}, nil, err
			}
		}
		q = cq{conn: c.conn, c: c}
		_, err = q.ExecContext(ctx, "BEGIN IMMEDIATE")
		if err == nil {
			return q, c.connMu.Unlock, nil
		}
		stuck := strings.Contains(err.Error(), "within a transaction")
		if !errors.Is(err, driver.ErrBadConn) && !errors.Is(err, sql.ErrConnDone) && !stuck || attempt > 0 {
			c.connMu.Unlock()
			return cq{}, nil, err
		}
		// A broken connection, or one left inside a transaction: drop it
		// and open another.
		c.discardConn()
	}
}

// discardConn closes the writers' connection for good: it does not go back
// to the pool, where a transaction left open on it would block every
// writer. connMu is held.
func (c *stmtCache) discardConn() {
	c.wc.reset()
	for _, st := range c.connStmts {
		st.Close()
	}
	c.connStmts = nil
	_ = c.conn.Raw(func(any) error { return driver.ErrBadConn })
	c.conn = nil
}

// readRow runs a single-row query and scans it, on the writers' connection
// when it is open and idle (its cache holds what this process last wrote),
// else on rd.
func (c *stmtCache) readRow(ctx context.Context, rd cq, scan func(*sql.Row) error, query string, args ...any) error {
	if c.connMu.TryLock() {
		if c.conn != nil {
			defer c.connMu.Unlock()
			st, err := c.connStmt(ctx, query)
			if err != nil {
				return err
			}
			return scan(st.QueryRowContext(ctx, args...))
		}
		c.connMu.Unlock()
	}
	return scan(rd.QueryRowContext(ctx, query, args...))
}

// connStmt is query prepared on the writers' connection; connMu is held.
func (c *stmtCache) connStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := c.connStmts[query]; ok {
		return st, nil
	}
	st, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if c.connStmts == nil {
		c.connStmts = map[string]*sql.Stmt{}
	}
	c.connStmts[query] = st
	return st, nil
}

// cq runs queries through cached prepared statements: inside tx when set,
// or on conn, the writers' connection, in a transaction begun by hand (see
// stmtCache.begin). Without a cache it runs them on tx directly (for a
// transaction that is still creating the schema, which other connections
// cannot see yet). It has the method set of *sql.Tx that the vault uses.
type cq struct {
	tx   *sql.Tx
	conn *sql.Conn
	c    *stmtCache
}

func (q cq) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if q.conn != nil {
		return q.c.connStmt(ctx, query)
	}
	st, err := q.c.get(ctx, query)
	if err != nil || q.tx == nil {
		return st, err
	}
	return q.tx.StmtContext(ctx, st), nil
}

// ExecContext executes a cached statement.
func (q cq) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if q.c == nil {
		return q.tx.ExecContext(ctx, query, args...)
	}
	st, err := q.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryContext runs a cached query.
func (q cq) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if q.c == nil {
		return q.tx.QueryContext(ctx, query, args...)
	}
	st, err := q.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext runs a cached single-row query. A preparation error
// surfaces from Scan, as with *sql.DB.
func (q cq) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if q.c == nil {
		return q.tx.QueryRowContext(ctx, query, args...)
	}
	st, err := q.stmt(ctx, query)
	if err != nil {
		// Let database/sql report the error through the Row.
		if q.conn != nil {
			return q.conn.QueryRowContext(ctx, query, args...)
		}
		if q.tx != nil {
			return q.tx.QueryRowContext(ctx, query, args...)
		}
		return q.c.db.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// Commit ends the transaction. On error the transaction may still be
// open: call Rollback.
func (q cq) Commit() error {
	if q.conn == nil {
		return q.tx.Commit()
	}
	_, err := q.ExecContext(context.Background(), "COMMIT")
	return err
}

// Rollback ends the transaction if it is still open, as *sql.Tx does: after
// a commit, or after SQLite rolled back by itself (on a full disk, say), it
// changes nothing.
func (q cq) Rollback() error {
	if q.conn == nil {
		return q.tx.Rollback()
	}
	_, err := q.ExecContext(context.Background(), "ROLLBACK")
	switch {
	case err == nil:
		return nil
	case strings.Contains(err.Error(), "no transaction is active"):
		return sql.ErrTxDone
	default:
		// The transaction may still be open: never use the connection again.
		q.c.discardConn()
		return err
	}
}
