package mount

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"testing"
	"time"

	"avfs/vault"
	"avfs/wire"
)

// TestRetentionUnderMount: the mount server bounds history in the
// background while it serves writes, and a file deleted while open keeps
// reading its content although only history referred to it.
func TestRetentionUnderMount(t *testing.T) {
	ctx := context.Background()
	s := serve(t, false)
	if _, err := s.v.SetRetention(ctx, vault.RetentionChange{Versions: ptr(int64(1)), HistoryPct: ptr(int64(1)), HistoryMinMB: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	content := make([]byte, 1<<20)
	rand.Read(content)
	for _, name := range []string{"held", "gone"} {
		if err := os.WriteFile(s.path(name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(s.path("held"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{"held", "gone"} {
		if err := os.Remove(s.path(name)); err != nil {
			t.Fatal(err)
		}
	}
	// 12 MiB of new data: past the 8 MiB slack, so the server runs a pass.
	big := make([]byte, 12<<20)
	rand.Read(big)
	if err := os.WriteFile(s.path("big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.v.Log(ctx, "/gone")
		if wire.HasCode(err, wire.CodeNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server ran no retention pass: /gone still has history (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := make([]byte, len(content))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the deleted, open file reads %v (equal %v) after the pass", err, bytes.Equal(got, content))
	}
	if vs, err := s.v.Log(ctx, "/held"); err != nil || len(vs) == 0 {
		t.Fatalf("the open file's history: %v %v", vs, err)
	}
	s.mustCheck()
}

func ptr[T any](v T) *T { return &v }
