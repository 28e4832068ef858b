package mount

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"avfs/vault"
)

// TestStagedChunks follows one open file through the stager without FUSE:
// full chunks are staged (the file keeps their hashes, no memory), read
// back from the vault before any commit, loaded back when written again
// (and staged again), and committed by hash at flush, which releases every staged row.
func TestStagedChunks(t *testing.T) {
	ctx := context.Background()
	v, err := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"}).Create(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	spill := t.TempDir()
	f := &fsys{store: v, spillDir: spill, buf: &buffers{dir: spill}, stager: newStager(v)}
	defer f.stager.stop()
	e, err := v.WriteFile(ctx, "/s", bytes.NewReader(nil), vault.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Content(ctx, e.Ino)
	if err != nil {
		t.Fatal(err)
	}
	of := newOpenFile(&node{fsys: f, ino: e.Ino}, c)
	const n = 64
	data := randomBytes(n*chunkSize + 100) // 64 full chunks and a partial one
	for off := 0; off < len(data); off += 1 << 20 {
		if _, en := of.write(ctx, data[off:min(off+1<<20, len(data))], int64(off)); en != 0 {
			t.Fatal(en)
		}
	}
	of.waitStaged()
	stats := func(step string, staged, mem int64) {
		t.Helper()
		if got := f.buf.stats(); got.StagedBytes != staged || got.MemoryBytes != mem {
			t.Fatalf("%s: %+v, want staged %d, memory %d", step, got, staged, mem)
		}
	}
	stats("written", n*chunkSize, chunkSize) // the partial last chunk stays in memory
	if k, err := v.StagedCount(ctx); err != nil || k != n {
		t.Fatalf("staged rows %d %v, want %d", k, err, n)
	}
	readAll := func(step string) {
		t.Helper()
		got := make([]byte, len(data))
		if k, en := of.read(ctx, got, 0); en != 0 || k != len(data) || !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes, %v, equal %v", step, k, en, bytes.Equal(got, data))
		}
	}
	readAll("staged, not committed")

	// A write into a staged chunk loads it back.
	at := 5*chunkSize + 7
	copy(data[at:], "written again")
	if _, en := of.write(ctx, []byte("written again"), int64(at)); en != 0 {
		t.Fatal(en)
	}
	readAll("rewritten")
	// Full again, it is staged again: the old content's row stays until
	// the commit.
	of.waitStaged()
	stats("rewritten", n*chunkSize, chunkSize)
	if k, _ := v.StagedCount(ctx); k != n+1 {
		t.Fatalf("staged rows %d after the rewrite, want %d", k, n+1)
	}
	readAll("rewritten, staged again")
	if en := of.flush(ctx); en != 0 {
		t.Fatal(en)
	}
	of.waitStaged()
	stats("flushed", 0, 0)
	if k, _ := v.StagedCount(ctx); k != 0 {
		t.Fatalf("%d staged rows after the commit", k)
	}
	var got bytes.Buffer
	if _, err := v.ReadFile(ctx, "/s", &got); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("vault content: %v, equal %v", err, bytes.Equal(got.Bytes(), data))
	}
	of.close()
	if rep, err := v.Check(ctx); err != nil || !rep.OK {
		t.Fatalf("vault check: %+v %v", rep.Problems, err)
	}
}

// TestStreamingWriteIsBounded: a big sequential write through the mount
// goes to the vault as it happens: the mount's memory stays within a small
// constant and nothing spills, whatever the file's size.
func TestStreamingWriteIsBounded(t *testing.T) {
	requireFUSE(t)
	ctx := context.Background()
	v, err := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"}).Create(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	dir := t.TempDir()
	sess, err := Mount(ctx, v, dir, Options{SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Unmount(true)
	const total = 256 << 20
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.New()
	src := rand.NewChaCha8([32]byte{7})
	piece := make([]byte, 1<<20)
	for off := 0; off < total; off += len(piece) {
		_, _ = src.Read(piece) // distinct data: no chunk deduplicates
		sum.Write(piece)
		if _, err := f.Write(piece); err != nil {
			t.Fatal(err)
		}
	}
	mid := sess.Buffers()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	after := sess.Buffers()
	const bound = 16 << 20
	if after.PeakMemoryBytes+after.PeakSpillBytes > bound || after.PeakSpillBytes != 0 {
		t.Errorf("a %d MiB write held %d bytes in memory and %d spilled at the peak; want at most %d, none spilled",
			total>>20, after.PeakMemoryBytes, after.PeakSpillBytes, bound)
	}
	if mid.StagedBytes == 0 || after.StagedBytes != 0 || after.MemoryBytes != 0 {
		t.Errorf("staged before close %d, after %d; memory after %d", mid.StagedBytes, after.StagedBytes, after.MemoryBytes)
	}
	if err := sess.Unmount(false); err != nil {
		t.Fatal(err)
	}
	check := sha256.New()
	if _, err := v.ReadFile(ctx, "/big", check); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(check.Sum(nil), sum.Sum(nil)) {
		t.Fatal("the vault does not hold what was written")
	}
	if k, _ := v.StagedCount(ctx); k != 0 {
		t.Fatalf("%d staged rows after the unmount", k)
	}
	if rep, err := v.Check(ctx); err != nil || !rep.OK {
		t.Fatalf("vault check: %+v %v", rep.Problems, err)
	}
}
