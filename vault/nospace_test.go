package vault

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"avfs/tests/fullfs"
	"avfs/wire"
)

// TestFullDiskIsNoSpace: a write on a full file system fails with no_space
// (wrapping ENOSPC, which a mount answers), changes nothing, and leaves the
// vault usable: reads go on, and once space is freed writes do too.
func TestFullDiskIsNoSpace(t *testing.T) {
	ctx := context.Background()
	small := fullfs.Mount(t, 8<<20)
	st := NewStore(small, Options{Actor: "test"})
	v, err := st.Create(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.WriteFile(ctx, "/kept", strings.NewReader("kept"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := v.Usage(ctx)
	filler := fullfs.Fill(t, small)
	_, err = v.WriteFile(ctx, "/big", bytes.NewReader(make([]byte, 1<<20)), WriteOptions{})
	if !wire.HasCode(err, wire.CodeNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v (code %s)", err, wire.CodeOf(err))
	}
	if after, _ := v.Usage(ctx); after != before {
		t.Fatalf("usage changed by a failed write: %+v, was %+v", after, before)
	}
	var b bytes.Buffer
	if _, err := v.ReadFile(ctx, "/kept", &b); err != nil || b.String() != "kept" {
		t.Fatalf("read on a full disk: %q %v", b.String(), err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := v.WriteFile(ctx, "/big", bytes.NewReader(make([]byte, 1<<20)), WriteOptions{}); err != nil {
		t.Fatalf("write once space is back: %v", err)
	}
	if rep, err := v.Check(ctx); err != nil || !rep.OK {
		t.Fatalf("check: %+v %v", rep, err)
	}
}
