package vault

import (
	"context"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

// vaultTree reads every file of the vault: path -> content ("<dir>" for a directory).
func vaultTree(t *testing.T, v *Vault) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := v.Walk(context.Background(), "/", func(e Entry) error {
		if e.Kind == KindDir {
			out[e.Path] = "<dir>"
		} else if e.Kind == KindFile {
			out[e.Path] = read(t, v, e.Path)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		if y, ok := b[k]; !ok || x != y {
			return false
		}
	}
	return true
}

func checkClean(t *testing.T, v *Vault) {
	t.Helper()
	rep, err := v.Check(context.Background())
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("vault check: %v %+v", err, rep.Problems)
	}
}

// runChanges does what a run would: a mark, then changes.
func runChanges(t *testing.T, v *Vault) Mark {
	t.Helper()
	ctx := context.Background()
	m, err := v.Mark(ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	write(t, v, "/keep.txt", "changed by the run\n")
	write(t, v, "/new/dir/file.bin", strings.Repeat("x", 200000))
	if _, err := v.Remove(ctx, "/gone.txt", false); err != nil {
		t.Fatal(err)
	}
	return m
}

func heldApproval(t *testing.T, v *Vault, h Held) Approval {
	t.Helper()
	a, err := v.CreateApproval(context.Background(), ApprovalRequest{Argv: []string{"x"}, Cwd: "/", Vault: "t", Digest: "d", TTL: time.Hour,
		Held: &HeldRef{Held: h.Held.Name, Base: h.Base.Name}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestHoldAndApply: held changes leave the vault as before the run;
// granting applies exactly the run's state; the checkpoints go.
func TestHoldAndApply(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/keep.txt", "before\n")
	write(t, v, "/gone.txt", "to be deleted\n")
	before := vaultTree(t, v)
	m := runChanges(t, v)
	after := vaultTree(t, v)

	h, res, err := v.HoldChanges(ctx, m, "run1")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 5 { // keep.txt modified, new, new/dir, new/dir/file.bin added, gone.txt deleted
		t.Errorf("undo listed %d changes: %+v", len(res.Changes), res.Changes)
	}
	if got := vaultTree(t, v); !sameFiles(got, before) {
		t.Fatalf("after hold: %v, want %v", got, before)
	}
	checkClean(t, v)
	if err := v.Release(ctx, m); err != nil {
		t.Fatal(err)
	}
	a := heldApproval(t, v, h)
	if _, err := v.ApplyHeld(ctx, a.ID, nil); !wire.HasCode(err, wire.CodeApprovalRejected) {
		t.Fatalf("apply of a pending approval: %v", err)
	}
	// Nor does restoring the held checkpoint by hand apply them.
	if _, err := v.RestoreCheckpoint(ctx, h.Held.Name); !wire.HasCode(err, wire.CodeApprovalRejected) {
		t.Fatalf("restore of a held checkpoint: %v", err)
	}
	if got := vaultTree(t, v); !sameFiles(got, before) {
		t.Fatalf("a refused restore changed the vault: %v", got)
	}
	if _, err := v.DecideApproval(ctx, a.ID, true, "ok", "test", ""); err != nil {
		t.Fatal(err)
	}
	refuse := func(Approval) error { return wire.Errorf(wire.CodeApprovalRejected, "bad proof") }
	if _, err := v.ApplyHeld(ctx, a.ID, refuse); err == nil || !strings.Contains(err.Error(), "bad proof") {
		t.Fatalf("apply with a failing check: %v", err)
	}
	if _, err := v.ApplyHeld(ctx, a.ID, nil); err != nil {
		t.Fatal(err)
	}
	if got := vaultTree(t, v); !sameFiles(got, after) {
		t.Fatalf("after apply: %v, want %v", got, after)
	}
	checkClean(t, v)
	cps, err := v.Checkpoints(ctx)
	if err != nil || len(cps) != 0 {
		t.Fatalf("checkpoints left: %+v %v", cps, err)
	}
	if got, _ := v.Approval(ctx, a.ID); got.Status != ApprovalUsed {
		t.Errorf("approval %s, want used", got.Status)
	}
	if _, err := v.ApplyHeld(ctx, a.ID, nil); !wire.HasCode(err, wire.CodeApprovalRejected) {
		t.Fatalf("second apply: %v", err)
	}
}

// TestApplyHeldConflict: a vault that moved after the hold refuses the
// held changes and keeps what it has.
func TestApplyHeldConflict(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/keep.txt", "before\n")
	write(t, v, "/gone.txt", "x\n")
	m := runChanges(t, v)
	h, _, err := v.HoldChanges(ctx, m, "run1")
	if err != nil {
		t.Fatal(err)
	}
	_ = v.Release(ctx, m)
	a := heldApproval(t, v, h)
	if _, err := v.DecideApproval(ctx, a.ID, true, "", "test", ""); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/other.txt", "written meanwhile\n")
	moved := vaultTree(t, v)
	if _, err := v.ApplyHeld(ctx, a.ID, nil); !wire.HasCode(err, wire.CodeConflict) || !strings.Contains(err.Error(), "/other.txt") {
		t.Fatalf("apply after a change: %v", err)
	}
	if got := vaultTree(t, v); !sameFiles(got, moved) {
		t.Fatalf("a refused apply changed the vault: %v", got)
	}
	checkClean(t, v)
}

// TestDenyDiscardsHeld: denying the approval drops the held changes and
// their checkpoints; the vault stays as before the run.
func TestDenyDiscardsHeld(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/keep.txt", "before\n")
	write(t, v, "/gone.txt", "x\n")
	before := vaultTree(t, v)
	m := runChanges(t, v)
	h, _, err := v.HoldChanges(ctx, m, "run1")
	if err != nil {
		t.Fatal(err)
	}
	_ = v.Release(ctx, m)
	a := heldApproval(t, v, h)
	if _, err := v.DecideApproval(ctx, a.ID, false, "no", "test", ""); err != nil {
		t.Fatal(err)
	}
	if cps, err := v.Checkpoints(ctx); err != nil || len(cps) != 0 {
		t.Fatalf("checkpoints left: %+v %v", cps, err)
	}
	if got := vaultTree(t, v); !sameFiles(got, before) {
		t.Fatalf("after deny: %v", got)
	}
	checkClean(t, v)
}

// TestChangesSinceContent: the change list with content readers and hashes.
func TestChangesSinceContent(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/keep.txt", "before\n")
	write(t, v, "/gone.txt", "x\n")
	m := runChanges(t, v)
	got := map[string]string{}
	err := v.ChangesSinceContent(ctx, m, func(c ContentChange) error {
		h := ""
		if c.After != nil {
			h = c.After.ContentHash()
		}
		got[c.Path] = c.Op + " " + h
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || !strings.HasPrefix(got["/keep.txt"], "modified sha256:") || got["/gone.txt"] != "deleted " || got["/new"] != "added " {
		t.Fatalf("got %v", got)
	}
	// Equal content, equal hash.
	write(t, v, "/copy.bin", strings.Repeat("x", 200000))
	var a, b string
	_ = v.ChangesSinceContent(ctx, m, func(c ContentChange) error {
		switch c.Path {
		case "/copy.bin":
			a = c.After.ContentHash()
		case "/new/dir/file.bin":
			b = c.After.ContentHash()
		}
		return nil
	})
	if a == "" || a != b {
		t.Errorf("hashes of equal content: %q %q", a, b)
	}
	_ = v.Release(ctx, m)
	if err := v.ChangesSinceContent(ctx, m, func(ContentChange) error { return nil }); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Errorf("released mark: %v", err)
	}
}

// gc drops held changes whose approval expired (their checkpoints go, a
// late grant cannot apply them) and keeps those of a pending one.
func TestGCDropsExpiredHeld(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/keep.txt", "before\n")
	write(t, v, "/gone.txt", "x\n")
	m := runChanges(t, v)
	h, _, err := v.HoldChanges(ctx, m, "run1")
	if err != nil {
		t.Fatal(err)
	}
	_ = v.Release(ctx, m)
	a, err := v.CreateApproval(ctx, ApprovalRequest{Argv: []string{"x"}, Cwd: "/", Vault: "t", Digest: "d", TTL: time.Nanosecond,
		Held: &HeldRef{Held: h.Held.Name, Base: h.Base.Name}})
	if err != nil {
		t.Fatal(err)
	}
	live, err := v.CreateApproval(ctx, ApprovalRequest{Argv: []string{"y"}, Cwd: "/", Vault: "t", Digest: "d", TTL: time.Hour,
		Held: &HeldRef{Held: h.Held.Name, Base: h.Base.Name}})
	if err != nil {
		t.Fatal(err)
	}
	// Denying the second approval discards run1's held changes; run2's are
	// then held behind new checkpoints (which may take the ids the deleted
	// ones had: approvals name them by their unique names) with a pending
	// approval gc must keep, while the expired one still names run1's.
	if _, err := v.DecideApproval(ctx, live.ID, false, "", "test", ""); err != nil {
		t.Fatal(err)
	}
	m2 := runChanges2(t, v)
	h2, _, err := v.HoldChanges(ctx, m2, "run2")
	if err != nil {
		t.Fatal(err)
	}
	_ = v.Release(ctx, m2)
	if _, err := v.CreateApproval(ctx, ApprovalRequest{Argv: []string{"z"}, Cwd: "/", Vault: "t", Digest: "d", TTL: time.Hour,
		Held: &HeldRef{Held: h2.Held.Name, Base: h2.Base.Name}}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.GC(ctx); err != nil {
		t.Fatal(err)
	}
	cps, err := v.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cps {
		names = append(names, c.Name)
	}
	if len(cps) != 2 || names[0] != "held-run2" || names[1] != "base-run2" {
		t.Fatalf("checkpoints after gc: %v (the expired approval's should be gone, the pending one's kept)", names)
	}
	if _, err := v.ApplyHeld(ctx, a.ID, nil); !wire.HasCode(err, wire.CodeApprovalRejected) {
		t.Errorf("apply of an expired approval: %v", err)
	}
	checkClean(t, v)
}

// runChanges2 is a second run's changes, after runChanges's were undone.
func runChanges2(t *testing.T, v *Vault) Mark {
	t.Helper()
	m, err := v.Mark(context.Background(), "run2")
	if err != nil {
		t.Fatal(err)
	}
	write(t, v, "/second.txt", "second run\n")
	return m
}
