package vault

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The writers' connection keeps the state row and the newest history
// versions it wrote between transactions (writeCache). These tests fail if
// it is used after another connection committed, or after a rollback.
func TestWriteCacheSeesOtherWriters(t *testing.T) {
	ctx := context.Background()
	s, a := newVault(t)
	b, err := s.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	// Interleaved writes of two handles (two connections, as two
	// processes would have) to new files and to the same file.
	for i, w := range []struct {
		v       *Vault
		p, data string
	}{
		{a, "/f", "a1"}, {a, "/x", "x"}, {b, "/f", "b2"}, {b, "/y", "y"}, {a, "/f", "a3"}, {a, "/z", "z"}, {b, "/f", "b4"}, {a, "/f", "a5"},
	} {
		if _, err := w.v.WriteFile(ctx, w.p, strings.NewReader(w.data), WriteOptions{}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if got := read(t, a, "/f"); got != "a5" {
		t.Errorf("/f = %q, want a5", got)
	}
	for _, v := range []*Vault{a, b} {
		info, err := v.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Files != 4 || info.Bytes != 2+1+1+1 {
			t.Errorf("info: %d files, %d bytes; want 4 files, 5 bytes", info.Files, info.Bytes)
		}
	}
	vers, err := a.Log(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	var ns []int64
	for _, v := range vers {
		ns = append(ns, v.N)
	}
	if len(ns) != 5 || ns[0] != 1 || ns[4] != 5 {
		t.Errorf("versions of /f: %v, want 1..5", ns)
	}
	if rep, err := a.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Errorf("audit verify: %+v, %v", rep, err)
	}
	mustCheck(t, a)
}

func TestWriteCacheForgetsRollbacks(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/f", "one")
	one := int64(1)
	if _, err := v.SetQuota(ctx, QuotaChange{MaxSizeMB: &one}); err != nil {
		t.Fatal(err)
	}
	// Refused after its version and audit row were prepared: rolled back.
	big := strings.Repeat("x", 2<<20)
	if _, err := v.WriteFile(ctx, "/f", strings.NewReader(big), WriteOptions{}); err == nil {
		t.Fatal("write over the size quota succeeded")
	}
	// A transaction that recorded a version, then failed.
	e, err := v.Stat(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = v.update(ctx, "test", func(tx *txn) error {
		in, err := getInode(ctx, tx.tx, int64(e.Ino))
		if err != nil {
			return err
		}
		in.mode = 0o600
		if err := tx.saveInode(in); err != nil {
			return err
		}
		if err := tx.recordVersionAt(in, "/f", "chmod"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update: %v, want boom", err)
	}
	write(t, v, "/f", "two")
	vers, err := v.Log(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if len(vers) != 2 || vers[1].N != 2 || vers[1].Size != 3 {
		t.Errorf("versions after a refused write: %+v, want 1 and 2", vers)
	}
	info, err := v.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Files != 1 || info.Bytes != 3 {
		t.Errorf("info: %d files, %d bytes; want 1, 3", info.Files, info.Bytes)
	}
	if rep, err := v.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Errorf("audit verify: %+v, %v", rep, err)
	}
	mustCheck(t, v)
}
