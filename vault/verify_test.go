package vault

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"avfs/wire"
)

// corruptChunk rewrites the stored data of the chunk holding data with
// plain SQL, as `sqlite3 v.avfs "update chunks set data = …"` would:
// bad replaces it (same hash and size recorded).
func corruptChunk(t *testing.T, v *Vault, data, bad []byte) []byte {
	t.Helper()
	h := sha256.Sum256(data)
	res, err := v.db.ExecContext(context.Background(), "UPDATE chunks SET data = ? WHERE hash = ?", bad, h[:])
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("corrupt: %d chunks updated", n)
	}
	return h[:]
}

// flipped is data with one byte changed: same length, another hash.
func flipped(data []byte) []byte {
	b := bytes.Clone(data)
	b[len(b)/2] ^= 0x5a
	return b
}

// wantDamaged fails t unless err is integrity_failed naming chunk h and
// the given details.
func wantDamaged(t *testing.T, what string, err error, h []byte, details map[string]any) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeIntegrity {
		t.Fatalf("%s: want integrity_failed, got %v", what, err)
	}
	if got := we.Details["chunk"]; got != hex.EncodeToString(h) {
		t.Errorf("%s: details chunk = %v, want %x (%v)", what, got, h, err)
	}
	for k, want := range details {
		if got := we.Details[k]; got != want {
			t.Errorf("%s: details %s = %v (%T), want %v (%T)", what, k, got, got, want, want)
		}
	}
}

// A chunk whose stored data no longer matches its hash is never served:
// every read path (cat's FileReader, ReadAt, Content, version reads,
// export, a partial write's read-modify-write) fails with integrity_failed
// naming the chunk and the file; what precedes it may be delivered, the
// bad chunk never; other files still read; restored data reads again.
func TestCorruptChunkNeverServed(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	const c = ChunkSize
	const bad = readBatch + 4 // in the second fetch, not at its start
	want := randomBytes(11, 2*readBatch*c+c/2)
	write(t, v, "/f", string(want))
	other := randomBytes(12, 3*c)
	write(t, v, "/g", string(other))
	orig := want[bad*c : (bad+1)*c]
	damaged := flipped(orig)
	h := corruptChunk(t, v, orig, damaged)

	// cat: the prefix before the bad chunk, then integrity_failed.
	var out bytes.Buffer
	n, err := v.ReadFile(ctx, "/f", &out)
	wantDamaged(t, "ReadFile", err, h, map[string]any{"path": "/f", "offset": int64(bad * c)})
	if n != bad*c || !bytes.Equal(out.Bytes(), want[:n]) {
		t.Fatalf("ReadFile delivered %d bytes (want the %d before the bad chunk), a prefix: %v", n, bad*c, bytes.HasPrefix(want, out.Bytes()))
	}

	// FileReader.ReadAt: a window inside the bad chunk leaves p untouched;
	// one across it delivers what precedes; one before it succeeds.
	r, err := v.OpenFile(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, w := range []struct{ off, n, wantN int64 }{
		{bad*c + 5, 100, 0}, {bad * c, c, 0}, {(bad - 1) * c, 3 * c, c}, {(bad-3)*c + 7, 4 * c, 3*c - 7},
	} {
		p := bytes.Repeat([]byte{0xa5}, int(w.n))
		got, err := r.ReadAt(p, w.off)
		wantDamaged(t, "ReadAt", err, h, map[string]any{"path": "/f"})
		if int64(got) != w.wantN || !bytes.Equal(p[:got], want[w.off:w.off+int64(got)]) {
			t.Errorf("ReadAt(%d, %d) = %d bytes, want %d of the file's", w.n, w.off, got, w.wantN)
		}
		if rest := p[got:]; !bytes.Equal(rest, bytes.Repeat([]byte{0xa5}, len(rest))) {
			for i, b := range rest {
				if at := w.off + int64(got) + int64(i); at >= bad*c && at < (bad+1)*c && b == damaged[at-bad*c] && b != 0xa5 {
					t.Fatalf("ReadAt(%d, %d): byte %d of the damaged chunk was copied into p", w.n, w.off, at)
				}
			}
		}
	}
	p := make([]byte, 2*c)
	if got, err := r.ReadAt(p, (bad-2)*c); err != nil || !bytes.Equal(p[:got], want[(bad-2)*c:bad*c]) {
		t.Errorf("ReadAt before the bad chunk: %d, %v", got, err)
	}
	if _, err := io.Copy(io.Discard, r); !wire.HasCode(err, wire.CodeIntegrity) {
		t.Errorf("Read through the file: %v", err)
	}

	// The API the mount reads through.
	e, err := v.Stat(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.ReadAt(ctx, e.Ino, make([]byte, 4096), bad*c+c-4096)
	wantDamaged(t, "Vault.ReadAt", err, h, map[string]any{"ino": e.Ino, "offset": int64(bad * c)})
	cont, err := v.Content(ctx, e.Ino)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cont.ReadAt(ctx, make([]byte, 1<<20), 16*c)
	wantDamaged(t, "Content.ReadAt", err, h, map[string]any{"ino": e.Ino})

	// A version read.
	vs, err := v.Log(ctx, "/f")
	if err != nil || len(vs) == 0 {
		t.Fatalf("log: %v, %d versions", err, len(vs))
	}
	_, err = v.ReadVersion(ctx, "/f", vs[len(vs)-1].N, io.Discard)
	wantDamaged(t, "ReadVersion", err, h, map[string]any{"path": "/f", "version": vs[len(vs)-1].N})

	// Export.
	dst := filepath.Join(t.TempDir(), "out")
	_, err = v.Export(ctx, "/", dst, false)
	wantDamaged(t, "Export", err, h, map[string]any{"path": "/f"})
	if b, err := os.ReadFile(filepath.Join(dst, "f")); err == nil && !bytes.HasPrefix(want[:bad*c], b) {
		t.Errorf("export wrote %d bytes that are not a prefix of the file before the bad chunk", len(b))
	}

	// A write into the bad chunk reads it first: it fails rather than
	// store a new chunk made of the damaged bytes.
	if _, err := v.WriteAt(ctx, e.Ino, []byte("x"), bad*c+1); !wire.HasCode(err, wire.CodeIntegrity) {
		t.Errorf("partial write into the bad chunk: %v", err)
	}

	// Other files are fine; vault check names the chunk.
	if got := read(t, v, "/g"); got != string(other) {
		t.Errorf("/g changed")
	}
	rep, err := v.Check(ctx)
	if err != nil || rep.OK {
		t.Errorf("check: %v, %+v", err, rep)
	}

	// The right data back: everything reads again.
	corruptChunk(t, v, orig, orig)
	if got := read(t, v, "/f"); got != string(want) {
		t.Errorf("/f after repair differs")
	}
	if _, err := v.Export(ctx, "/", filepath.Join(t.TempDir(), "out2"), false); err != nil {
		t.Errorf("export after repair: %v", err)
	}
}

// A chunk read on its own (a one-chunk file: chunkData) is verified too,
// and so is its length against the recorded size.
func TestCorruptSingleChunk(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	for _, tc := range []struct {
		name string
		bad  func([]byte) []byte
	}{
		{"flipped", flipped},
		{"shorter", func(b []byte) []byte { return b[:len(b)-1] }},
		{"longer", func(b []byte) []byte { return append(bytes.Clone(b), 0) }},
		{"empty", func([]byte) []byte { return []byte{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randomBytes(uint64(len(tc.name)), 1000+len(tc.name))
			p := "/" + tc.name
			write(t, v, p, string(data))
			h := corruptChunk(t, v, data, tc.bad(data))
			var out bytes.Buffer
			n, err := v.ReadFile(ctx, p, &out)
			wantDamaged(t, "ReadFile", err, h, map[string]any{"path": p, "offset": int64(0)})
			if n != 0 || out.Len() != 0 {
				t.Errorf("%d bytes delivered", n)
			}
			buf := make([]byte, 10)
			r, err := v.OpenFile(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if n, err := r.Read(buf); n != 0 || !wire.HasCode(err, wire.CodeIntegrity) {
				t.Errorf("Read: %d, %v", n, err)
			}
			// Undamaged, the same reads succeed.
			corruptChunk(t, v, data, data)
			if got := read(t, v, p); got != string(data) {
				t.Errorf("after repair: differs")
			}
		})
	}
}

// A fork reads its parent's chunks through the same check.
func TestCorruptChunkInForkParent(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t)
	want := randomBytes(21, 3*ChunkSize)
	write(t, v, "/f", string(want))
	f, err := s.Fork(ctx, "t", "child")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := read(t, f, "/f"); got != string(want) {
		t.Fatal("fork reads differently")
	}
	h := corruptChunk(t, v, want[ChunkSize:2*ChunkSize], flipped(want[ChunkSize:2*ChunkSize]))
	var out bytes.Buffer
	n, err := f.ReadFile(ctx, "/f", &out)
	wantDamaged(t, "fork ReadFile", err, h, map[string]any{"path": "/f", "offset": int64(ChunkSize)})
	if n > ChunkSize || !bytes.Equal(out.Bytes(), want[:n]) {
		t.Errorf("fork delivered %d bytes", n)
	}
}
