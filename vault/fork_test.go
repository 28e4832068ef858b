package vault

import (
	"bytes"
	"context"
	"os"
	"testing"

	"avfs/wire"
)

func TestForkIsolationDetachAndGC(t *testing.T) {
	ctx := context.Background()
	s, parent := newVault(t)
	big := randBytes(3 * ChunkSize)
	if _, err := parent.WriteFile(ctx, "/big.bin", bytes.NewReader(big), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	write(t, parent, "/shared.txt", "parent")
	fork, err := s.Fork(ctx, "t", "f")
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()
	info, err := fork.Info(ctx)
	if err != nil || info.Parent == nil || info.Parent.Name != "t" {
		t.Fatalf("fork info %+v %v", info, err)
	}
	// The fork borrows content: its file holds no chunks.
	var n int
	if err := fork.rdb.QueryRow("SELECT COUNT(*) FROM chunks").Scan(&n); err != nil || n != 0 {
		t.Fatalf("fork stores %d chunks (%v)", n, err)
	}
	var b bytes.Buffer
	if _, err := fork.ReadFile(ctx, "/big.bin", &b); err != nil || !bytes.Equal(b.Bytes(), big) {
		t.Fatalf("fork read: %v", err)
	}
	write(t, fork, "/shared.txt", "fork")
	write(t, fork, "/only-fork", "f")
	write(t, parent, "/only-parent", "p")
	if read(t, parent, "/shared.txt") != "parent" || read(t, fork, "/shared.txt") != "fork" {
		t.Fatal("writes leaked between parent and fork")
	}
	if _, err := parent.Stat(ctx, "/only-fork"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Fatal("fork file visible in parent")
	}
	if _, err := fork.Stat(ctx, "/only-parent"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Fatal("parent file visible in fork")
	}
	// The parent deletes the file and collects garbage: the fork keeps it.
	if _, err := parent.Remove(ctx, "/big.bin", false); err != nil {
		t.Fatal(err)
	}
	if _, err := parent.Prune(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := parent.GC(ctx); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if _, err := fork.ReadFile(ctx, "/big.bin", &b); err != nil || !bytes.Equal(b.Bytes(), big) {
		t.Fatalf("fork lost borrowed data after parent gc: %v", err)
	}
	mustCheck(t, parent)
	mustCheck(t, fork)
	// Delete is refused while the fork lives.
	if err := s.Delete(ctx, "t", false); !wire.HasCode(err, wire.CodeVaultHasForks) {
		t.Fatalf("delete with forks: %v", err)
	}
	// A fork of the fork borrows through two levels.
	ff, err := s.Fork(ctx, "f", "ff")
	if err != nil {
		t.Fatal(err)
	}
	defer ff.Close()
	if read(t, ff, "/shared.txt") != "fork" {
		t.Fatal("grandchild content")
	}
	// Force-delete the parent: the fork is detached first and keeps its data.
	parent.Close()
	if err := s.Delete(ctx, "t", true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.PathOf("t")); !os.IsNotExist(err) {
		t.Fatal("parent file still there")
	}
	fork2, err := s.Open(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer fork2.Close()
	b.Reset()
	if _, err := fork2.ReadFile(ctx, "/big.bin", &b); err != nil || !bytes.Equal(b.Bytes(), big) {
		t.Fatalf("detached fork read: %v", err)
	}
	if info, _ := fork2.Info(ctx); info.Parent != nil || len(info.Forks) != 1 {
		t.Fatalf("detached fork info %+v", info)
	}
	mustCheck(t, fork2)
	ff2, _ := s.Open(ctx, "ff")
	defer ff2.Close()
	b.Reset()
	if _, err := ff2.ReadFile(ctx, "/big.bin", &b); err != nil || !bytes.Equal(b.Bytes(), big) {
		t.Fatalf("grandchild read after grandparent deletion: %v", err)
	}
}

func TestForkErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := newVault(t)
	if _, err := s.Fork(ctx, "nope", "x"); !wire.HasCode(err, wire.CodeVaultNotFound) {
		t.Fatalf("fork missing: %v", err)
	}
	if _, err := s.Fork(ctx, "t", "t"); !wire.HasCode(err, wire.CodeAlreadyExists) {
		t.Fatalf("fork onto existing: %v", err)
	}
	if _, err := s.Fork(ctx, "t", "../x"); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Fatalf("fork bad name: %v", err)
	}
	if err := s.Detach(ctx, "t"); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Fatalf("detach non-fork: %v", err)
	}
}
