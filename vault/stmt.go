package vault

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache prepares each query once per database handle; database/sql
// then keeps one prepared statement per connection.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
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
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// cq runs queries through cached prepared statements, inside tx when set.
// Without a cache it runs them on tx directly (for a transaction that is
// still creating the schema, which other connections cannot see yet).
// It has the method set of *sql.Tx that the vault uses.
type cq struct {
	tx *sql.Tx
	c  *stmtCache
}

func (q cq) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
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
		if q.tx != nil {
			return q.tx.QueryRowContext(ctx, query, args...)
		}
		return q.c.db.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// Commit and Rollback pass through to the transaction.
func (q cq) Commit() error   { return q.tx.Commit() }
func (q cq) Rollback() error { return q.tx.Rollback() }
