package vault

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestZZPerf(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	d, _ := v.Mknod(ctx, RootIno, "small", NodeSpec{Kind: KindDir, Mode: 0o755})
	data := make([]byte, 100)
	var tl, tm, tp time.Duration
	for i := 0; i < 2000; i++ {
		s := time.Now()
		v.Lookup(ctx, d.Ino, fmt.Sprint("f", i))
		tl += time.Since(s)
		s = time.Now()
		a, err := v.Mknod(ctx, d.Ino, fmt.Sprint("f", i), NodeSpec{Kind: KindFile, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		tm += time.Since(s)
		s = time.Now()
		if _, err := v.Persist(ctx, a.Ino, 100, []int64{0}, func(int64) ([]byte, error) { return data, nil }, time.Time{}); err != nil {
			t.Fatal(err)
		}
		tp += time.Since(s)
	}
	t.Logf("lookup %v mknod %v persist %v per op", tl/2000, tm/2000, tp/2000)
}

func TestZZEmptyTx(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	var sync, jm string
	v.db.QueryRow("PRAGMA synchronous").Scan(&sync)
	v.db.QueryRow("PRAGMA journal_mode").Scan(&jm)
	s := time.Now()
	for i := 0; i < 1000; i++ {
		v.update(ctx, "x", func(t *txn) error { return nil })
	}
	t.Logf("sync=%s jm=%s empty update %v", sync, jm, time.Since(s)/1000)
	s = time.Now()
	for i := 0; i < 1000; i++ {
		v.update(ctx, "x", func(t *txn) error { t.audit("x", "/", nil); return nil })
	}
	t.Logf("audit-only update %v", time.Since(s)/1000)
	s = time.Now()
	for i := 0; i < 1000; i++ {
		tx, _ := v.db.Begin()
		tx.Exec("UPDATE state SET gen = gen WHERE id = 1")
		tx.Commit()
	}
	t.Logf("raw begin/update/commit %v", time.Since(s)/1000)
}
