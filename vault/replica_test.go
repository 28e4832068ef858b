package vault

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"testing"
)

// walBytes is the size of the vault's log file, 0 when there is none.
func walBytes(t *testing.T, v *Vault) int64 {
	t.Helper()
	fi, err := os.Stat(v.Path() + "-wal")
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestReplicatedVaultNotCheckpointed: a vault with the replica mark is
// never checkpointed by avfs below the bound — not by the background
// checkpointer, not by gc, not when its last connection closes — so the
// log's frames remain for the replicator; without the mark, Close folds
// the log into the file. The data stays readable through the log.
func TestReplicatedVaultNotCheckpointed(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		marked     bool
		wantLogged bool // frames remain in the log after Close
	}{
		{"marked", true, true},
		{"unmarked", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(t.TempDir(), Options{Actor: "test"})
			v, err := s.Create(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			v.Close()
			if tc.marked {
				if _, err := s.SetReplicaMark(ctx, "r", "file:///nowhere"); err != nil {
					t.Fatal(err)
				}
			}
			v, err = s.Open(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if v.Replicated() != tc.marked {
				t.Fatalf("Replicated() = %v, want %v", v.Replicated(), tc.marked)
			}
			v.StartCheckpointer()
			var f42 string
			for i := range 100 { // 20 MiB, distinct: past checkpointLogBytes
				b := make([]byte, 200<<10)
				rand.Read(b)
				write(t, v, fmt.Sprintf("/d/f%03d", i), string(b))
				if i == 42 {
					f42 = string(b)
				}
			}
			if _, err := v.GC(ctx); err != nil {
				t.Fatal(err)
			}
			if passes, _ := v.CheckpointerStatus(); tc.marked && passes != 0 {
				t.Fatalf("the background checkpointer ran %d checkpoints on a replicated vault", passes)
			}
			if tc.wantLogged {
				// Nothing copied back: the log's index says no frame is
				// backfilled (SQLite's nBackfill), and the log holds them all.
				shm, err := os.Open(v.Path() + "-shm")
				if err != nil {
					t.Fatal(err)
				}
				size, pending, ok := walPending(shm)
				shm.Close()
				if !ok || size < 20<<20 || pending != size {
					t.Fatalf("log before Close: %d bytes, %d not copied back (ok %v): want 20 MiB, none copied back", size, pending, ok)
				}
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			wal := walBytes(t, v)
			if tc.wantLogged {
				if wal < 20<<20 {
					t.Fatalf("log after Close: %d bytes, want the 20 MiB written still in it", wal)
				}
				// Reopened, SQLite rebuilds the index from the log: a
				// checkpoint at Close would have emptied it.
			} else if wal != 0 {
				t.Fatalf("unmarked vault: log of %d bytes after Close, want it folded", wal)
			}
			v, err = s.Open(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if got := read(t, v, "/d/f042"); got != f42 {
				t.Fatalf("read back %d bytes", len(got))
			}
			rep, err := v.Check(ctx)
			if err != nil || len(rep.Problems) > 0 {
				t.Fatalf("check: %v %+v", err, rep.Problems)
			}
		})
	}
}

// TestReplicaMark: the mark round-trips, is listed, is cleared with the
// replicator's state, and goes with the vault when it is deleted.
func TestReplicaMark(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t)
	v.Close()
	if _, err := s.SetReplicaMark(ctx, "nope", "file:///x"); err == nil {
		t.Fatal("marked a vault that does not exist")
	}
	if _, err := s.SetReplicaMark(ctx, "t", "s3://bucket/t"); err != nil {
		t.Fatal(err)
	}
	marks, bad, err := s.Replicas()
	if err != nil || len(bad) != 0 || marks["t"].URL != "s3://bucket/t" {
		t.Fatalf("Replicas() = %v %v %v", marks, bad, err)
	}
	if err := os.MkdirAll(LitestreamDir(s.PathOf("t")), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearReplicaMark(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveReplicaState("t"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ReadReplicaMark(s.PathOf("t")); ok {
		t.Fatal("mark still there")
	}
	if _, err := os.Stat(LitestreamDir(s.PathOf("t"))); !os.IsNotExist(err) {
		t.Fatalf("replicator state not removed: %v", err)
	}
	if _, err := s.SetReplicaMark(ctx, "t", "s3://bucket/t"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(ReplicaMarkPath(s.PathOf("t")), []byte("{"), 0o600)
	if _, bad, _ := s.Replicas(); bad["t"] == nil {
		t.Fatal("a damaged mark is not reported")
	}
	if err := s.Delete(ctx, "t", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ReplicaMarkPath(s.PathOf("t"))); !os.IsNotExist(err) {
		t.Fatalf("mark left after delete: %v", err)
	}
}

// TestReplicatedVaultBound: with no replicator running, a replicated
// vault's log does not grow past the bound: its writer checkpoints inline
// there all the same, and the log restarts.
func TestReplicatedVaultBound(t *testing.T) {
	ctx := context.Background()
	replicatedBound.Store(1 << 20)
	defer replicatedBound.Store(walReplicatedBoundBytes)
	s := NewStore(t.TempDir(), Options{Actor: "test"})
	v, err := s.Create(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	if _, err := s.SetReplicaMark(ctx, "r", "file:///nowhere"); err != nil {
		t.Fatal(err)
	}
	if v, err = s.Open(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	maxLog := int64(0)
	for i := range 48 { // 3 MiB in 64 KiB files, one transaction each
		b := make([]byte, 64<<10)
		rand.Read(b)
		write(t, v, fmt.Sprintf("/f%02d", i), string(b))
		shm, err := os.Open(v.Path() + "-shm")
		if err != nil {
			t.Fatal(err)
		}
		if size, _, ok := walPending(shm); ok {
			maxLog = max(maxLog, size)
		}
		shm.Close()
	}
	if maxLog == 0 || maxLog > 2<<20 {
		t.Fatalf("log of a replicated vault reached %d bytes with a bound of 1 MiB", maxLog)
	}
}
