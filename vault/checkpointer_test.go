package vault

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"avfs/wire"
)

// writerAutoCheckpoint is the wal_autocheckpoint (pages) of v's writer
// connection, read inside a write transaction (on that connection).
func writerAutoCheckpoint(t *testing.T, v *Vault) int64 {
	t.Helper()
	var n int64
	err := v.update(context.Background(), "test", func(tx *txn) error {
		return tx.tx.QueryRowContext(context.Background(), "PRAGMA wal_autocheckpoint").Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func walSize(t *testing.T, v *Vault) int64 {
	t.Helper()
	fi, err := os.Stat(v.Path() + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCheckpointerKeepsLogSmall writes 64 MiB in 4 MiB transactions with
// the background checkpointer running and readers reading meanwhile:
// checkpoints run in the background, the log never grows far past
// walBoundBytes, and once writes pause it is emptied, so Close has nothing
// left to copy.
func TestCheckpointerKeepsLogSmall(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	v.StartCheckpointer()
	v.StartCheckpointer() // a no-op
	if got, want := writerAutoCheckpoint(t, v), int64(walBoundBytes/4096); got != want {
		t.Fatalf("wal_autocheckpoint with the checkpointer: %d pages, want %d (the bound)", got, want)
	}
	const files, size = 16, 4 << 20
	contents := make([][]byte, files)
	for i := range contents {
		contents[i] = randBytes(size)
	}
	var wg sync.WaitGroup
	written := make(chan int, files)
	errs := make(chan error, files)
	wg.Add(1)
	go func() { // readers: every file read back as soon as it is written
		defer wg.Done()
		for i := range written {
			var b bytes.Buffer
			if _, err := v.ReadFile(ctx, fmt.Sprintf("/f%02d", i), &b); err != nil {
				errs <- err
				continue
			}
			if !bytes.Equal(b.Bytes(), contents[i]) {
				errs <- fmt.Errorf("f%02d read back differs", i)
			}
		}
	}()
	for i, c := range contents {
		if _, err := v.WriteFile(ctx, fmt.Sprintf("/f%02d", i), bytes.NewReader(c), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		written <- i
	}
	close(written)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The log emptied, and the TRUNCATE that did it recorded.
	deadline := time.Now().Add(20 * time.Second)
	for {
		passes, err := v.CheckpointerStatus()
		size := walSize(t, v)
		if size == 0 && err == nil && passes >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log still %d bytes 20 s after the last write (%d checkpoints, last error %v); want 0 after at least 2 (passive while writing, truncate after)", size, passes, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	shm, err := os.Open(v.Path() + "-shm")
	if err != nil {
		t.Fatal(err)
	}
	defer shm.Close()
	if _, pending, ok := walPending(shm); !ok || pending != 0 {
		t.Fatalf("log pending %d bytes (ok %v) once idle, want 0", pending, ok)
	}
	mustCheck(t, v)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v2, err := Open(ctx, v.Path(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	for i, c := range contents {
		if got := read(t, v2, fmt.Sprintf("/f%02d", i)); got != string(c) {
			t.Fatalf("f%02d differs after reopening", i)
		}
	}
}

// TestWALPending reads the log's index: what a commit appends is pending
// until a checkpoint copies it back.
func TestWALPending(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	shm, err := os.Open(v.Path() + "-shm")
	if err != nil {
		t.Fatal(err)
	}
	defer shm.Close()
	size0, before, ok := walPending(shm)
	if !ok {
		t.Fatal("walPending: cannot read the index")
	}
	if _, err := v.WriteFile(ctx, "/big", bytes.NewReader(randBytes(2<<20)), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	size1, after, ok := walPending(shm)
	if !ok || after-before < 2<<20 || size1-size0 != after-before {
		t.Fatalf("after writing 2 MiB: log %d bytes, pending %d (before: %d, %d; ok %v), want both at least 2 MiB more, by as much", size1, after, size0, before, ok)
	}
	if _, err := v.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		t.Fatal(err)
	}
	if size, got, ok := walPending(shm); !ok || got != 0 || size < size1 {
		t.Fatalf("after a checkpoint: log %d bytes, pending %d (ok %v), want at least %d (a checkpoint does not restart the log) and 0", size, got, ok, size1)
	}
	if _, _, ok := walPending(nil); ok {
		t.Fatal("walPending without an index claims to know")
	}
}

// TestPageSize: new vaults and forks get PageSize or Options.PageSize; a
// vault of another page size opens and works with its inline checkpoint
// scaled to it; a page size SQLite has not is refused.
func TestPageSize(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		opt, want int
	}{{0, PageSize}, {16384, 16384}, {65536, 65536}, {512, 512}} {
		t.Run(fmt.Sprint(tc.opt), func(t *testing.T) {
			s := NewStore(t.TempDir(), Options{Actor: "test", PageSize: tc.opt})
			v, err := s.Create(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			write(t, v, "/a/b", "hello")
			v.Close()
			f, err := s.Fork(ctx, "p", "f")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			v, err = NewStore(s.Dir, Options{Actor: "test"}).Open(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			for _, x := range []*Vault{v, f} {
				var ps int64
				if err := x.rdb.QueryRowContext(ctx, "PRAGMA page_size").Scan(&ps); err != nil {
					t.Fatal(err)
				}
				if ps != int64(tc.want) {
					t.Fatalf("%s: page size %d, want %d", x.Path(), ps, tc.want)
				}
				if got := read(t, x, "/a/b"); got != "hello" {
					t.Fatalf("%s: read %q", x.Path(), got)
				}
				if got, want := writerAutoCheckpoint(t, x), autoCheckpointPages(walAutoCheckpointBytes, int64(tc.want)); got != want {
					t.Fatalf("%s: wal_autocheckpoint %d pages, want %d", x.Path(), got, want)
				}
				mustCheck(t, x)
			}
			write(t, f, "/a/c", "fork")
			if got := read(t, f, "/a/c"); got != "fork" {
				t.Fatalf("fork read %q", got)
			}
		})
	}
	for _, bad := range []int{3000, 256, 131072, -4096} {
		_, err := NewStore(t.TempDir(), Options{PageSize: bad}).Create(ctx, "p")
		if !wire.HasCode(err, wire.CodeInvalidInput) {
			t.Fatalf("page size %d: %v, want invalid_input", bad, err)
		}
	}
}
