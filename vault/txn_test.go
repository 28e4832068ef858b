package vault

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

// Write transactions are begun by hand on the writers' connection (see
// stmtCache.begin). These tests pin what *sql.Tx used to guarantee.
func TestUpdateEndsEveryTransaction(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/a", "one")

	// An error inside the transaction rolls back what it wrote before.
	boom := errors.New("boom")
	err := v.update(ctx, "test", func(tx *txn) error {
		if _, err := tx.tx.ExecContext(ctx, "UPDATE state SET name = 'renamed' WHERE id = 1"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update: %v, want boom", err)
	}
	if info, err := v.Info(ctx); err != nil || info.Name != "t" {
		t.Fatalf("name after rollback = %q, %v; want t", info.Name, err)
	}

	// A cancelled context fails the write and leaves no transaction open.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := v.WriteFile(cctx, "/b", strings.NewReader("two"), WriteOptions{}); err == nil {
		t.Fatal("write with a cancelled context succeeded")
	}
	write(t, v, "/c", "three")

	// A panic inside the transaction rolls back too.
	func() {
		defer func() { _ = recover() }()
		_ = v.update(ctx, "test", func(tx *txn) error {
			if _, err := tx.tx.ExecContext(ctx, "UPDATE state SET name = 'panicked' WHERE id = 1"); err != nil {
				return err
			}
			panic("inside a transaction")
		})
	}()
	write(t, v, "/d", "four")
	if info, err := v.Info(ctx); err != nil || info.Name != "t" {
		t.Fatalf("name after panic = %q, %v; want t", info.Name, err)
	}
	for p, want := range map[string]string{"/a": "one", "/c": "three", "/d": "four"} {
		if got := read(t, v, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if _, err := v.Stat(ctx, "/b"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Errorf("stat /b after a cancelled write: %v, want not_found", err)
	}
}

// A connection left inside a transaction (by a bug, or a rollback that
// failed) is replaced instead of failing every later write.
func TestUpdateReplacesStuckConnection(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/a", "one")
	v.ws.connMu.Lock()
	if _, err := v.ws.conn.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	stuck := v.ws.conn
	v.ws.connMu.Unlock()

	write(t, v, "/b", "two")
	if v.ws.conn == stuck {
		t.Error("the connection left in a transaction is still in use")
	}
	if got := read(t, v, "/b"); got != "two" {
		t.Errorf("/b = %q", got)
	}
}

// A write starts no goroutine when its context cannot be cancelled, as in
// the mount: database/sql's BeginTx started one per transaction and one per
// query, and waking them cost more than a small write's SQL.
func TestUpdateStartsNoGoroutines(t *testing.T) {
	ctx := context.WithoutCancel(context.Background())
	_, v := newVault(t)
	write(t, v, "/warm", "x")
	time.Sleep(10 * time.Millisecond) // let goroutines of the set-up end
	before := runtime.NumGoroutine()
	var most int
	for i := 0; i < 20; i++ {
		err := v.update(ctx, "test", func(tx *txn) error {
			if _, err := getInode(ctx, tx.tx, rootIno); err != nil {
				return err
			}
			most = max(most, runtime.NumGoroutine())
			_, err := tx.tx.ExecContext(ctx, "UPDATE state SET name = name WHERE id = 1")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if most > before {
		t.Errorf("goroutines inside a write transaction: %d, before: %d", most, before)
	}
}
