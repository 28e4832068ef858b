package vault

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"avfs/wire"
)

// randomBytes returns n bytes that do not repeat (no chunk is deduplicated).
func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// readerSizes are the sizes at which streaming could go wrong: empty, one
// byte, around a chunk, around a fetch (16 chunks), several fetches.
var readerSizes = []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 17,
	readBatch * ChunkSize, readBatch*ChunkSize + 1, 2*readBatch*ChunkSize + 5*ChunkSize + 3}

// checkReader reads r (just opened) with reads of 1 to 3 bytes and
// compares with want; then its ReadAt at every offset of a small file (a
// query each), at windows across chunks and fetches of a larger one.
func checkReader(t *testing.T, r *FileReader, want []byte) {
	t.Helper()
	if len(want) <= 4096 {
		if err := iotest.TestReader(r, want); err != nil {
			t.Errorf("%d bytes: %v", len(want), err)
		}
		return
	}
	if err := iotest.TestReader(struct{ io.Reader }{r}, want); err != nil {
		t.Errorf("%d bytes: %v", len(want), err)
	}
	size := int64(len(want))
	for _, w := range []struct{ off, n int64 }{
		{0, size}, {0, size + 1}, {1, ChunkSize}, {ChunkSize - 1, 2}, {batch - 3, 7}, {batch - 3, batch + 7},
		{size - 1, 1}, {size - 1, 10}, {size, 1}, {size + 5, 1},
	} {
		p := make([]byte, w.n)
		n, err := r.ReadAt(p, w.off)
		end := min(max(w.off, 0)+w.n, size)
		wantN := max(end-w.off, 0)
		wantErr := error(nil)
		if w.off+w.n > size {
			wantErr = io.EOF
		}
		if int64(n) != wantN || err != wantErr || !bytes.Equal(p[:n], want[min(w.off, size):min(w.off, size)+wantN]) {
			t.Errorf("%d bytes: ReadAt(%d bytes, %d) = %d, %v", size, w.n, w.off, n, err)
		}
	}
}

// A FileReader returns the file's bytes whatever the sizes of the reads:
// Read, ReadAt and WriteTo (iotest checks Read and ReadAt against each other).
func TestFileReaderSizes(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	for i, size := range readerSizes {
		want := randomBytes(uint64(i), size)
		write(t, v, "/f", string(want))
		var out bytes.Buffer
		n, err := v.ReadFile(ctx, "/f", &out)
		if err != nil || n != int64(size) || sha256.Sum256(out.Bytes()) != sha256.Sum256(want) {
			t.Fatalf("size %d: ReadFile wrote %d bytes (sha256 equal %v): %v", size, n, bytes.Equal(out.Bytes(), want), err)
		}
		r, err := v.OpenFile(ctx, "/f")
		if err != nil {
			t.Fatal(err)
		}
		if r.Size() != int64(size) {
			t.Fatalf("size %d: Size() = %d", size, r.Size())
		}
		checkReader(t, r, want)
		r.Close()
		// Small reads of odd sizes, then the rest with WriteTo.
		r, err = v.OpenFile(ctx, "/f")
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, min(size, 3*ChunkSize+5))
		if _, err := io.ReadFull(iotest.HalfReader(r), head); err != nil {
			t.Fatalf("size %d: small reads: %v", size, err)
		}
		var rest bytes.Buffer
		if _, err := r.WriteTo(&rest); err != nil {
			t.Fatal(err)
		}
		if got := append(head, rest.Bytes()...); !bytes.Equal(got, want) {
			t.Errorf("size %d: small reads then WriteTo differ", size)
		}
		if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("size %d: read at the end: %d, %v", size, n, err)
		}
		r.Close()
	}
}

// A reader sees the file as it was when it was opened, whatever is written
// or removed meanwhile.
func TestFileReaderSnapshot(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	want := randomBytes(1, 3*readBatch*ChunkSize+11)
	write(t, v, "/f", string(want))
	r, err := v.OpenFile(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	head := make([]byte, 5000)
	if _, err := io.ReadFull(r, head); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/f", "replaced")
	if _, err := v.Remove(ctx, "/f", false); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(append(head, rest...), want) {
		t.Fatalf("content changed under the reader (%d bytes): %v", len(head)+len(rest), err)
	}
}

// Versions stream as files do; a symlink's version reads as its target.
func TestFileReaderVersions(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	one, two := randomBytes(1, 2*readBatch*ChunkSize+1), randomBytes(2, ChunkSize+1)
	write(t, v, "/f", string(one))
	write(t, v, "/f", string(two))
	for n, want := range map[int64][]byte{1: one, 2: two} {
		r, err := v.OpenVersion(ctx, "/f", n)
		if err != nil {
			t.Fatal(err)
		}
		if r.Size() != int64(len(want)) {
			t.Errorf("version %d: size %d", n, r.Size())
		}
		checkReader(t, r, want)
		r.Close()
	}
	if _, err := v.Symlink(ctx, "target/of/link", "/l"); err != nil {
		t.Fatal(err)
	}
	log, err := v.Log(ctx, "/l")
	if err != nil || len(log) == 0 {
		t.Fatalf("symlink log %v %v", log, err)
	}
	var b bytes.Buffer
	if _, err := v.ReadVersion(ctx, "/l", log[0].N, &b); err != nil || b.String() != "target/of/link" {
		t.Fatalf("symlink version: %q %v", b.String(), err)
	}
	r, err := v.OpenVersion(ctx, "/l", log[0].N)
	if err != nil {
		t.Fatal(err)
	}
	checkReader(t, r, []byte("target/of/link"))
	r.Close()
}

// Opening fails, before any content, with the error of the path.
func TestFileReaderOpenErrors(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/d/f", "x")
	if _, err := v.Remove(ctx, "/d/f", false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		open func() (*FileReader, error)
		code wire.Code
	}{
		{func() (*FileReader, error) { return v.OpenFile(ctx, "/missing") }, wire.CodeNotFound},
		{func() (*FileReader, error) { return v.OpenFile(ctx, "/d") }, wire.CodeIsDir},
		{func() (*FileReader, error) { return v.OpenVersion(ctx, "/d/f", 99) }, wire.CodeVersionNotFound},
		{func() (*FileReader, error) { return v.OpenVersion(ctx, "/d/f", 2) }, wire.CodeVersionNotFound}, // its deletion
	} {
		if r, err := c.open(); !wire.HasCode(err, c.code) {
			t.Errorf("want %s, got %v (reader %v)", c.code, err, r != nil)
		}
	}
}

// A chunk that goes missing in the middle of a file fails the read with a
// typed error after the content before it was delivered; a closed reader
// and a failing writer fail typed too.
func TestFileReaderErrors(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	want := randomBytes(3, 2*readBatch*ChunkSize)
	write(t, v, "/f", string(want))
	missing := sha256.Sum256(want[(readBatch+2)*ChunkSize : (readBatch+3)*ChunkSize])
	if _, err := v.db.ExecContext(ctx, "DELETE FROM chunks WHERE hash = ?", missing[:]); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n, err := v.ReadFile(ctx, "/f", &out)
	if !wire.HasCode(err, wire.CodeIntegrity) || !strings.Contains(err.Error(), "read /f") {
		t.Fatalf("missing chunk: %v", err)
	}
	if n != (readBatch+2)*ChunkSize || !bytes.Equal(out.Bytes(), want[:n]) {
		t.Fatalf("before the missing chunk: %d bytes written, a prefix: %v", n, bytes.Equal(out.Bytes(), want[:min(int(n), len(want))]))
	}
	write(t, v, "/g", "content")
	r, err := v.OpenFile(ctx, "/g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteTo(failingWriter{}); !wire.HasCode(err, wire.CodeHostIO) {
		t.Errorf("failing writer: %v", err)
	}
	r.Close()
	r.Close()
	if _, err := r.Read(make([]byte, 1)); !wire.HasCode(err, wire.CodeInternal) {
		t.Errorf("read after close: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	r, err = v.OpenFile(cctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cancel()
	if _, err := r.WriteTo(io.Discard); wire.CodeOf(err) == "" {
		t.Errorf("cancelled read: %v", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk on fire") }
