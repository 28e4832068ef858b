package mount

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"

	"avfs/vault"
	"avfs/wire"
)

// A chunk whose stored data was changed behind the vault's back (plain
// SQL on the vault file) is never served through the mount: a read that
// reaches it fails with EIO; what precedes it reads as the file's bytes;
// other files read as ever.
func TestMountCorruptChunkEIO(t *testing.T) {
	const c = vault.ChunkSize
	s := serve(t, false)
	rng := rand.New(rand.NewPCG(14, 1))
	want := make([]byte, 4*c)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(s.path("f"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path("g"), []byte("intact"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.stop() // no page of f stays in the kernel's cache

	const bad = 2
	orig := want[bad*c : (bad+1)*c]
	damaged := bytes.Clone(orig)
	damaged[100] ^= 0xff
	h := sha256.Sum256(orig)
	db, err := sql.Open("sqlite3", "file:"+s.v.Path()+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec("UPDATE chunks SET data = ? WHERE hash = ?", damaged, h[:])
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%d chunks updated", n)
	}
	if _, err := s.v.ReadFile(context.Background(), "/f", io.Discard); !wire.HasCode(err, wire.CodeIntegrity) {
		t.Fatalf("vault read of the damaged file: %v", err)
	}
	s.start(false)

	// The whole file: EIO, after no more than the chunks before the bad one.
	f, err := os.Open(s.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of the damaged file: %d bytes, %v; want EIO", len(got), err)
	}
	if len(got) > bad*c || !bytes.Equal(got, want[:len(got)]) {
		t.Fatalf("read %d bytes before EIO: not a prefix of the content before the bad chunk", len(got))
	}
	// Inside the bad chunk, from its first byte or its middle: EIO, no byte.
	for _, off := range []int64{bad * c, bad*c + 50, bad*c + c - 10} {
		p := make([]byte, 64)
		n, err := f.ReadAt(p, off)
		if !errors.Is(err, syscall.EIO) || n != 0 {
			t.Errorf("ReadAt(%d): %d bytes, %v; want EIO", off, n, err)
		}
	}
	// Before it: the file's bytes.
	p := make([]byte, 4096)
	if n, err := f.ReadAt(p, c+7); err != nil || !bytes.Equal(p[:n], want[c+7:c+7+n]) {
		t.Errorf("ReadAt before the bad chunk: %d, %v", n, err)
	}
	if b, err := os.ReadFile(s.path("g")); err != nil || string(b) != "intact" {
		t.Errorf("other file: %q, %v", b, err)
	}
}
