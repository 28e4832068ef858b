package mount

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"

	"avfs/tests/fullfs"
	"avfs/vault"
)

// randomBytes returns n bytes that do not repeat (crypto/rand takes
// seconds for tens of MiB here).
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{byte(n), byte(n >> 8), byte(n >> 16)}).Read(b)
	return b
}

// spillUsed is how many bytes of the spill file system are in use.
func spillUsed(t *testing.T, dir string, size int64) int64 {
	t.Helper()
	return size - fullfs.Free(t, dir)
}

// TestVaultQuotaFailsAtWrite: a write that would take the vault beyond
// max_size_mb, counting its committed bytes and the unflushed writes of
// every open file, fails at write(2) with EDQUOT; what was written before
// is committed at close, and a write the quota has no room for at all
// spills nothing. Before, the writes were buffered (and spilled) whole and
// failed at close.
func TestVaultQuotaFailsAtWrite(t *testing.T) {
	const spillSize = 64 << 20
	spill := fullfs.Mount(t, spillSize)
	s := serve(t, false, "AVFS_MOUNT_MEMLIMIT=1048576", "AVFS_MOUNT_SPILL_DIR="+spill)
	ctx := context.Background()
	ten := int64(10)
	s.stop() // the mount reads the quotas when it starts (and then once a second)
	if _, err := s.v.SetQuota(ctx, vault.QuotaChange{MaxSizeMB: &ten}); err != nil {
		t.Fatal(err)
	}
	s.start(false)

	base := randomBytes(4 << 20)
	if err := os.WriteFile(s.path("base"), base, 0o644); err != nil {
		t.Fatal(err)
	}
	// Two files open at once: the second may grow the vault by what the
	// first left of the quota, 10 - 4 - 3 MiB.
	a, err := os.Create(s.path("a"))
	if err != nil {
		t.Fatal(err)
	}
	dataA := randomBytes(3 << 20)
	if _, err := a.Write(dataA); err != nil {
		t.Fatalf("write a: %v", err)
	}
	b, err := os.Create(s.path("b"))
	if err != nil {
		t.Fatal(err)
	}
	dataB := randomBytes(5 << 20)
	n, err := b.Write(dataB)
	if !errors.Is(err, syscall.EDQUOT) || n != 3<<20 {
		t.Fatalf("write b past the quota: %d bytes, %v; want %d bytes, EDQUOT", n, err, 3<<20)
	}
	if used := spillUsed(t, spill, spillSize); used > 6<<20 {
		t.Fatalf("%d bytes spilled for 6 MiB written", used)
	}
	for _, f := range []*os.File{a, b} {
		if err := f.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	// The vault is full: a large write is refused before anything is
	// buffered or spilled.
	c, err := os.Create(s.path("c"))
	if err != nil {
		t.Fatal(err)
	}
	n, err = c.Write(make([]byte, 64<<20))
	if !errors.Is(err, syscall.EDQUOT) || n != 0 {
		t.Fatalf("write into a full vault: %d bytes, %v", n, err)
	}
	if used := spillUsed(t, spill, spillSize); used != 0 {
		t.Fatalf("%d bytes spilled after every file was committed", used)
	}
	// Rewriting what exists grows nothing: allowed.
	if _, err := c.Close(), os.WriteFile(s.path("a"), dataA, 0o644); err != nil {
		t.Fatalf("rewrite within the quota: %v", err)
	}
	s.stop()
	for p, want := range map[string][]byte{"/base": base, "/a": dataA, "/b": dataB[:3<<20], "/c": {}} {
		if !bytes.Equal(readVault(t, s.v, p), want) {
			t.Errorf("%s: vault content differs", p)
		}
	}
	if u, _ := s.v.Usage(ctx); u.Bytes != 10<<20 {
		t.Errorf("vault holds %d bytes, want 10 MiB", u.Bytes)
	}
	s.mustCheck()
}

// writeSparse writes data into f at off chunk by chunk, leaving the last
// 4 KiB of every chunk unwritten, so that no chunk fills (full chunks are
// staged in the vault, see stager): the mount holds them all, in memory
// and then spilled. It returns how many bytes were written and the first
// error, and updates model, what the file then holds.
func writeSparse(f *os.File, data []byte, off int64, model *[]byte) (int, error) {
	const cs, gap = vault.ChunkSize, 4096
	n := 0
	for pos := 0; pos < len(data); pos += cs {
		end := min(pos+cs-gap, len(data))
		k, err := f.WriteAt(data[pos:end], off+int64(pos))
		if k > 0 {
			at := int(off) + pos
			if grow := at + k - len(*model); grow > 0 {
				*model = append(*model, make([]byte, grow)...)
			}
			copy((*model)[at:], data[pos:pos+k])
		}
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestSpillIsBounded: without a vault quota, the spill of unflushed
// writes stops with ENOSPC at write(2) at the spill limit, or before the
// spill directory's file system is full (a margin stays free); what was
// written is committed at close.
func TestSpillIsBounded(t *testing.T) {
	cases := []struct {
		name      string
		spillSize int64 // a tmpfs of that size for the spill; 0: a directory of the test's
		limit     int64 // Options.SpillLimit
		maxKept   int   // at most this much is accepted
	}{
		{"free space", 8 << 20, 0, 9 << 20},  // 1 MiB in memory, the rest spilled
		{"spill limit", 0, 2 << 20, 3 << 20}, // 1 MiB in memory, 2 MiB spilled
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spill := t.TempDir()
			if tc.spillSize > 0 {
				spill = fullfs.Mount(t, tc.spillSize)
			}
			s := serve(t, false, "AVFS_MOUNT_MEMLIMIT=1048576", "AVFS_MOUNT_SPILL_DIR="+spill,
				"AVFS_MOUNT_SPILL_LIMIT="+strconv.FormatInt(tc.limit, 10))
			data := randomBytes(16 << 20)
			f, err := os.Create(s.path("big"))
			if err != nil {
				t.Fatal(err)
			}
			var model []byte
			n, err := writeSparse(f, data, 0, &model)
			if !errors.Is(err, syscall.ENOSPC) || n == 0 || n > tc.maxKept {
				t.Fatalf("write: %d bytes, %v; want ENOSPC after 1 to %d bytes", n, err, tc.maxKept)
			}
			if tc.spillSize > 0 && fullfs.Free(t, spill) < tc.spillSize/spillMarginPart {
				t.Fatalf("the spill directory was left %d bytes free", fullfs.Free(t, spill))
			}
			if err := f.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			s.stop()
			if !bytes.Equal(readVault(t, s.v, "/big"), model) {
				t.Fatal("the vault does not hold what the writer was told was written")
			}
			s.mustCheck()
		})
	}
}

// TestFullSpillDirIsENOSPC: a spill directory that fills up under the
// mount (another process took the space) gives the writer ENOSPC, not
// EIO, and loses nothing: what was flushed stays, and what the writer was
// told was written is committed at close.
func TestFullSpillDirIsENOSPC(t *testing.T) {
	spill := fullfs.Mount(t, 32<<20)
	s := serve(t, false, "AVFS_MOUNT_MEMLIMIT=1048576", "AVFS_MOUNT_SPILL_DIR="+spill)
	data := randomBytes(8 << 20)
	f, err := os.Create(s.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	var model []byte
	if _, err := writeSparse(f, data[:2<<20], 0, &model); err != nil { // spills
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	fullfs.Fill(t, spill)
	n, err := writeSparse(f, data[2<<20:], 2<<20, &model)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write with the spill directory full: %d bytes, %v; want ENOSPC", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	s.stop()
	if !bytes.Equal(readVault(t, s.v, "/f"), model) {
		t.Fatal("the vault does not hold what the writer was told was written")
	}
	s.mustCheck()
}

// TestBuffersAccount follows the mount's account through writes, a
// refusal, a flush and a close of two open files, without FUSE: growth is
// what committing them would add, a refused write changes nothing, a
// flush moves its growth to the committed bytes and empties the spill, a
// close gives everything back.
func TestBuffersAccount(t *testing.T) {
	ctx := context.Background()
	st := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"})
	v, err := st.Create(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	one := int64(1)
	if _, err := v.SetQuota(ctx, vault.QuotaChange{MaxSizeMB: &one}); err != nil {
		t.Fatal(err)
	}
	saved := memLimit
	memLimit = 2 * chunkSize
	defer func() { memLimit = saved }()
	spill := t.TempDir()
	f := &fsys{store: v, spillDir: spill, buf: &buffers{dir: spill}}
	open := func(p string) *openFile {
		e, err := v.WriteFile(ctx, p, bytes.NewReader(nil), vault.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := v.Content(ctx, e.Ino)
		if err != nil {
			t.Fatal(err)
		}
		return newOpenFile(&node{fsys: f, ino: e.Ino}, c)
	}
	a, b := open("/a"), open("/b")
	const half = 512 << 10
	steps := []struct {
		name  string
		do    func() syscall.Errno
		errno syscall.Errno
		want  BufferStats // the fields compared: memory, spill, growth, refused
	}{
		{"a writes half", func() syscall.Errno { _, en := a.write(ctx, randomBytes(half), 0); return en }, 0,
			BufferStats{MemoryBytes: 2 * chunkSize, SpillBytes: half - 2*chunkSize, GrowthBytes: half}},
		{"b writes half", func() syscall.Errno { _, en := b.write(ctx, randomBytes(half), 0); return en }, 0,
			BufferStats{MemoryBytes: 4 * chunkSize, SpillBytes: 2*half - 4*chunkSize, GrowthBytes: 2 * half}},
		{"b grows past the quota", func() syscall.Errno { _, en := b.write(ctx, []byte{1}, half); return en }, syscall.EDQUOT,
			BufferStats{MemoryBytes: 4 * chunkSize, SpillBytes: 2*half - 4*chunkSize, GrowthBytes: 2 * half, RefusedQuota: 1}},
		{"b rewrites", func() syscall.Errno { _, en := b.write(ctx, []byte{1}, 0); return en }, 0,
			BufferStats{MemoryBytes: 4 * chunkSize, SpillBytes: 2*half - 4*chunkSize, GrowthBytes: 2 * half, RefusedQuota: 1}},
		{"a flushes", func() syscall.Errno { return a.flush(ctx) }, 0,
			BufferStats{MemoryBytes: 2 * chunkSize, SpillBytes: half - 2*chunkSize, GrowthBytes: half, RefusedQuota: 1}},
		{"a, committed, still leaves no room", func() syscall.Errno { _, en := a.write(ctx, []byte{1}, half); return en }, syscall.EDQUOT,
			BufferStats{MemoryBytes: 2 * chunkSize, SpillBytes: half - 2*chunkSize, GrowthBytes: half, RefusedQuota: 2}},
		{"b closes unflushed", func() syscall.Errno { b.close(); return 0 }, 0,
			BufferStats{RefusedQuota: 2}},
	}
	for _, s := range steps {
		if en := s.do(); en != s.errno {
			t.Fatalf("%s: errno %v, want %v", s.name, en, s.errno)
		}
		got := f.buf.stats()
		got.PeakMemoryBytes, got.PeakSpillBytes = 0, 0
		if got != s.want {
			t.Fatalf("%s: %+v, want %+v", s.name, got, s.want)
		}
	}
	if u, _ := v.Usage(ctx); u.Bytes != half || f.buf.committed != half {
		t.Fatalf("vault bytes %d, counted committed %d; want %d", u.Bytes, f.buf.committed, half)
	}
	if peak := f.buf.stats().PeakSpillBytes; peak != 2*half-4*chunkSize {
		t.Fatalf("peak spill %d", peak)
	}
}
