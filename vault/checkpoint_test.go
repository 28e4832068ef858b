package vault

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

func TestCheckpointRestoreAndDiff(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/keep.txt", "keep")
	write(t, v, "/edit.txt", "v1")
	write(t, v, "/del/x.txt", "x")
	if _, err := v.Symlink(ctx, "keep.txt", "/link"); err != nil {
		t.Fatal(err)
	}
	cp1, err := v.SaveCheckpoint(ctx, "one", "first")
	if err != nil {
		t.Fatal(err)
	}
	if cp1.Files != 5 { // keep, edit, del, del/x, link
		t.Fatalf("checkpoint files = %d", cp1.Files)
	}
	write(t, v, "/edit.txt", "version two")
	write(t, v, "/new.txt", "new")
	if _, err := v.Remove(ctx, "/del", true); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Chmod(ctx, "/keep.txt", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Move(ctx, "/link", "/link2"); err != nil {
		t.Fatal(err)
	}
	changes, err := v.Diff(ctx, "one", "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range changes {
		got[c.Path] = c.Op
	}
	want := map[string]string{"/edit.txt": "modified", "/new.txt": "added", "/del": "deleted", "/del/x.txt": "deleted",
		"/keep.txt": "modified", "/link": "deleted", "/link2": "added"}
	for p, op := range want {
		if got[p] != op {
			t.Errorf("diff %s = %q, want %q (all: %v)", p, got[p], op, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("diff has %d changes, want %d: %v", len(got), len(want), got)
	}
	cp2, err := v.SaveCheckpoint(ctx, "two", "")
	if err != nil {
		t.Fatal(err)
	}
	// Restore the first, then the second: both states come back exactly.
	if _, err := v.RestoreCheckpoint(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if read(t, v, "/edit.txt") != "v1" || read(t, v, "/del/x.txt") != "x" {
		t.Fatal("restore one: wrong content")
	}
	if _, err := v.Stat(ctx, "/new.txt"); err == nil {
		t.Fatal("restore one: /new.txt still exists")
	}
	if e, _ := v.Stat(ctx, "/keep.txt"); e.Mode != 0o644 {
		t.Fatalf("restore one: mode %o", e.Mode)
	}
	if e, _ := v.Stat(ctx, "/link"); e.Target != "keep.txt" {
		t.Fatalf("restore one: symlink %+v", e)
	}
	mustCheck(t, v)
	if d, _ := v.Diff(ctx, "one", ""); len(d) != 0 {
		t.Fatalf("after restore, diff to the checkpoint is %v", d)
	}
	if _, err := v.RestoreCheckpoint(ctx, "2"); err != nil { // by id
		t.Fatal(err)
	}
	if read(t, v, "/edit.txt") != "version two" || read(t, v, "/new.txt") != "new" {
		t.Fatal("restore two: wrong content")
	}
	if _, err := v.Stat(ctx, "/del"); err == nil {
		t.Fatal("restore two: /del exists")
	}
	mustCheck(t, v)
	// History says the current content is the latest version.
	log, err := v.Log(ctx, "/edit.txt")
	if err != nil {
		t.Fatal(err)
	}
	if last := log[len(log)-1]; last.Size != int64(len("version two")) {
		t.Fatalf("latest version %+v", last)
	}
	// Deleting a checkpoint keeps the others restorable.
	if _, err := v.DeleteCheckpoint(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/edit.txt", "three")
	if _, err := v.RestoreCheckpoint(ctx, cp2.Name); err != nil {
		t.Fatal(err)
	}
	if read(t, v, "/edit.txt") != "version two" {
		t.Fatal("restore after delete")
	}
	if _, err := v.GC(ctx); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, v)
	if _, err := v.RestoreCheckpoint(ctx, "one"); !strings.Contains(err.Error(), "no checkpoint") {
		t.Fatalf("deleted checkpoint restored: %v", err)
	}
}

func TestCheckpointNames(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	for i := 0; i < 5; i++ { // unnamed checkpoints never collide
		if _, err := v.SaveCheckpoint(ctx, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.SaveCheckpoint(ctx, "x", ""); err != nil {
		t.Fatal(err)
	}
	for _, good := range []string{"before:v1.2_x-y", "Z", strings.Repeat("a", 128)} {
		if _, err := v.SaveCheckpoint(ctx, good, ""); err != nil {
			t.Errorf("checkpoint name %q: %v", good, err)
		}
	}
	for _, bad := range []string{"x", "123", "a b", "../x", ".x", "-x", ":x", "é", strings.Repeat("a", 129), "a/b", "a\x00"} {
		if _, err := v.SaveCheckpoint(ctx, bad, ""); err == nil {
			t.Errorf("checkpoint name %q accepted", bad)
		}
	}
	cps, _ := v.Checkpoints(ctx)
	if len(cps) != 9 {
		t.Fatalf("%d checkpoints", len(cps))
	}
}

func TestPruneCheckpoints(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	var cps []Checkpoint
	for i := range 5 {
		write(t, v, "/f", strings.Repeat("x", i+1))
		cp, err := v.SaveCheckpoint(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		cps = append(cps, cp)
	}
	names := func() (ids []int64) {
		list, err := v.Checkpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, cp := range list {
			ids = append(ids, cp.ID)
		}
		return ids
	}
	if _, _, err := v.PruneCheckpoints(ctx, -1, time.Time{}); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Fatalf("no limit: %v", err)
	}
	// Made before a moment still in the future: all are older, but the
	// newest 3 are kept.
	gone, _, err := v.PruneCheckpoints(ctx, 3, time.Now().Add(time.Hour))
	if err != nil || len(gone) != 2 || gone[0].ID != cps[0].ID || gone[1].ID != cps[1].ID {
		t.Fatalf("keep 3: %+v %v", gone, err)
	}
	// None is older than an hour.
	if gone, _, err = v.PruneCheckpoints(ctx, -1, time.Now().Add(-time.Hour)); err != nil || len(gone) != 0 {
		t.Fatalf("older than an hour: %+v %v", gone, err)
	}
	if ids := names(); len(ids) != 3 || ids[0] != cps[2].ID {
		t.Fatalf("left: %v", ids)
	}
	// What is left restores, byte for byte; the pruned ones are gone.
	if _, err := v.RestoreCheckpoint(ctx, strconv.FormatInt(cps[2].ID, 10)); err != nil {
		t.Fatal(err)
	}
	if got := read(t, v, "/f"); got != "xxx" {
		t.Fatalf("restored %q", got)
	}
	if _, err := v.RestoreCheckpoint(ctx, strconv.FormatInt(cps[1].ID, 10)); !wire.HasCode(err, wire.CodeCheckpointNotFound) {
		t.Fatalf("pruned checkpoint: %v", err)
	}
	if gone, _, err = v.PruneCheckpoints(ctx, 0, time.Time{}); err != nil || len(gone) != 3 || len(names()) != 0 {
		t.Fatalf("keep 0: %+v %v", gone, err)
	}
	mustCheck(t, v)
}
