package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"avfs/vault"
	"avfs/wire"
)

// catRandom returns n bytes that do not repeat (no chunk is shared).
func catRandom(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 11))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// cat streams every size, raw and --json, the file and its versions, with
// the bytes and sha256 of what was written.
func TestCatSizes(t *testing.T) {
	a := newAVFS(t)
	const c = vault.ChunkSize
	for i, size := range []int{0, 1, c - 1, c, c + 1, 5*c + 3, 16*c + 1, 40*c + 7} {
		want := catRandom(uint64(i), size)
		p := fmt.Sprintf("/f%d", size)
		a.okIn(want, "write", p)
		a.okIn([]byte("second"), "write", p)
		for _, args := range [][]string{{p, "--version", "1"}, {"--version", "1", p}} {
			r := a.exec(nil, append([]string{"cat"}, args...)...)
			if r.code != 0 || sha256.Sum256(r.stdout) != sha256.Sum256(want) || !bytes.Equal(r.stdout, want) {
				t.Fatalf("cat %q (%d bytes): exit %d, %d bytes, equal %v: %s", args, size, r.code, len(r.stdout), bytes.Equal(r.stdout, want), r.stderr)
			}
			var doc wire.CatResult
			a.into(&doc, append([]string{"cat"}, args...)...)
			got, err := base64.StdEncoding.DecodeString(doc.ContentBase64)
			if err != nil || doc.Path != p || doc.Version != 1 || doc.Size != int64(size) || sha256.Sum256(got) != sha256.Sum256(want) {
				t.Fatalf("cat --json %q (%d bytes): %v, path %q, version %d, size %d, %d bytes", args, size, err, doc.Path, doc.Version, doc.Size, len(got))
			}
			// Byte for byte what encoding/json prints for the document.
			r = a.exec(nil, append(append([]string{"cat"}, args...), "--json")...)
			var full bytes.Buffer
			_ = writeJSON(&full, wire.CatResult{Path: p, Version: 1, Size: int64(size), ContentBase64: base64.StdEncoding.EncodeToString(want)})
			if !bytes.Equal(r.stdout, full.Bytes()) {
				t.Fatalf("cat --json %q: the streamed document differs from encoding/json's", args)
			}
		}
		equal(t, "latest", a.cat(p), "second")
	}
}

// A chunk missing in the middle of a file: the content before it was
// printed, then avfs stops with integrity_failed on stderr and exit 1
// (with --json, after an unfinished document).
func TestCatFailsMidStream(t *testing.T) {
	a := newAVFS(t)
	const c = vault.ChunkSize
	want := catRandom(7, 40*c)
	a.okIn(want, "write", "/f")
	missing := sha256.Sum256(want[20*c : 21*c])
	db := openDB(t, filepath.Join(a.home, "vaults", "default.avfs"))
	if _, err := db.Exec("DELETE FROM chunks WHERE hash = ?", missing[:]); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r := a.exec(nil, "cat", "/f")
	if r.code != 1 || !strings.Contains(string(r.stderr), "avfs: read /f") || !strings.Contains(string(r.stderr), "missing") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if len(r.stdout) < c || len(r.stdout) > 20*c || !bytes.Equal(r.stdout, want[:len(r.stdout)]) {
		t.Fatalf("stdout: %d bytes, a prefix of the content: %v", len(r.stdout), bytes.HasPrefix(want, r.stdout))
	}
	r = a.exec(nil, "cat", "/f", "--json")
	var full bytes.Buffer
	_ = writeJSON(&full, wire.CatResult{Path: "/f", Size: int64(len(want)), ContentBase64: base64.StdEncoding.EncodeToString(want)})
	if r.code != 1 || !strings.Contains(string(r.stderr), "avfs: read /f") || json.Valid(r.stdout) ||
		len(r.stdout) < c || !bytes.HasPrefix(full.Bytes(), r.stdout) {
		t.Fatalf("--json: exit %d, stderr %q, %d bytes of stdout, a prefix %v", r.code, r.stderr, len(r.stdout), bytes.HasPrefix(full.Bytes(), r.stdout))
	}
	// Before any content: one error document, as for any command.
	a.fail(1, "not_found", "cat", "/missing")
}

// The reproduction: a chunk's data changed with plain SQL. avfs
// cat, a version's cat and export fail with integrity_failed (exit 1)
// instead of printing the changed bytes; cat prints no more than what
// precedes the chunk.
func TestCatDamagedChunk(t *testing.T) {
	a := newAVFS(t)
	const c = vault.ChunkSize
	want := catRandom(9, 3*c)
	a.okIn(want, "write", "/f")
	orig := want[c : 2*c]
	h := sha256.Sum256(orig)
	damaged := bytes.Clone(orig)
	damaged[7] ^= 1
	db := openDB(t, filepath.Join(a.home, "vaults", "default.avfs"))
	if _, err := db.Exec("UPDATE chunks SET data = ? WHERE hash = ?", damaged, h[:]); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r := a.exec(nil, "cat", "/f")
	if r.code != 1 || !strings.Contains(string(r.stderr), "avfs: read /f") || !strings.Contains(string(r.stderr), "damaged") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if len(r.stdout) > c || !bytes.Equal(r.stdout, want[:len(r.stdout)]) {
		t.Fatalf("stdout: %d bytes, a prefix of the content before the damaged chunk: %v", len(r.stdout), bytes.HasPrefix(want, r.stdout))
	}
	r = a.exec(nil, "cat", "/f", "--version", "1")
	if r.code != 1 || !strings.Contains(string(r.stderr), "damaged") || len(r.stdout) > c || !bytes.Equal(r.stdout, want[:len(r.stdout)]) {
		t.Fatalf("version: exit %d, stderr %q, %d bytes", r.code, r.stderr, len(r.stdout))
	}
	eo := a.fail(1, "integrity_failed", "export", "/f", filepath.Join(t.TempDir(), "out"))
	if eo["chunk"] != hex.EncodeToString(h[:]) || eo["path"] != "/f" {
		t.Errorf("export error names the chunk and the file: %v", eo)
	}
	// Restored, it reads again.
	db = openDB(t, filepath.Join(a.home, "vaults", "default.avfs"))
	if _, err := db.Exec("UPDATE chunks SET data = ? WHERE hash = ?", orig, h[:]); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if r := a.exec(nil, "cat", "/f"); r.code != 0 || !bytes.Equal(r.stdout, want) {
		t.Fatalf("after repair: exit %d, %d bytes", r.code, len(r.stdout))
	}
}
