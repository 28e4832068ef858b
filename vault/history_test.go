package vault

import (
	"bytes"
	"context"
	"testing"

	"avfs/wire"
)

func TestHistoryLogRevertPrune(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	for _, s := range []string{"one", "two", "three"} {
		write(t, v, "/f", s)
	}
	write(t, v, "/f", "three") // no change: no new version
	log, err := v.Log(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 3 || log[2].Size != 5 || log[0].Size != 3 {
		t.Fatalf("log %+v", log)
	}
	var b bytes.Buffer
	if _, err := v.ReadVersion(ctx, "/f", 2, &b); err != nil || b.String() != "two" {
		t.Fatalf("version 2 = %q %v", b.String(), err)
	}
	// Revert with no --to goes one back; reverting again goes back to three.
	if ver, err := v.Revert(ctx, "/f", 0); err != nil || ver.N != 4 {
		t.Fatalf("revert: %+v %v", ver, err)
	}
	if read(t, v, "/f") != "two" {
		t.Fatal("revert content")
	}
	if _, err := v.Revert(ctx, "/f", 0); err != nil {
		t.Fatal(err)
	}
	if read(t, v, "/f") != "three" {
		t.Fatal("second revert content")
	}
	if _, err := v.Revert(ctx, "/f", 1); err != nil || read(t, v, "/f") != "one" {
		t.Fatalf("revert --to 1: %v", err)
	}
	log, _ = v.Log(ctx, "/f")
	if last := log[len(log)-1]; last.Size != 3 || last.Op != "revert" {
		t.Fatalf("latest %+v", last)
	}
	// A deleted file keeps its history and can be brought back.
	if _, err := v.Remove(ctx, "/f", false); err != nil {
		t.Fatal(err)
	}
	log, _ = v.Log(ctx, "/f")
	if log[len(log)-1].Op != "delete" {
		t.Fatalf("no delete version: %+v", log)
	}
	if _, err := v.Revert(ctx, "/f", 0); err != nil || read(t, v, "/f") != "one" {
		t.Fatalf("undelete: %v", err)
	}
	mustCheck(t, v)
	if _, err := v.ReadVersion(ctx, "/f", 99, &b); !wire.HasCode(err, wire.CodeVersionNotFound) {
		t.Fatalf("missing version: %v", err)
	}
	res, err := v.Prune(ctx, PruneOptions{Keep: 2})
	if err != nil || res.Versions == 0 {
		t.Fatalf("prune %+v %v", res, err)
	}
	log, _ = v.Log(ctx, "/f")
	if len(log) != 2 {
		t.Fatalf("after prune %d versions", len(log))
	}
	if _, err := v.GC(ctx); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, v)
	if read(t, v, "/f") != "one" {
		t.Fatal("content after gc")
	}
}
