package vault

import (
	"context"
	"errors"
	"testing"
	"time"

	"avfs/wire"
)

func TestApprovalLifecycle(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	req := ApprovalRequest{Argv: []string{"curl", "x"}, Cwd: "/", Vault: "t", Digest: "d1", TTL: time.Hour, Reasons: []string{"avfs.approval.network"}}
	a, err := v.CreateApproval(ctx, req)
	if err != nil || a.Status != ApprovalPending {
		t.Fatalf("create: %+v %v", a, err)
	}
	if _, err := v.UseApproval(ctx, a.ID, "d1", "e1", nil); !wire.HasCode(err, wire.CodeApprovalRejected) {
		t.Fatalf("use while pending: %v", err)
	}
	if _, err := v.DecideApproval(ctx, a.ID, true, "ok", "alice", "mac"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.DecideApproval(ctx, a.ID, false, "", "bob", ""); !wire.HasCode(err, wire.CodeApprovalRejected) {
		t.Fatalf("decide twice: %v", err)
	}
	if _, err := v.UseApproval(ctx, a.ID, "other", "e1", nil); !wire.HasCode(err, wire.CodeApprovalRejected) {
		t.Fatalf("use with another digest: %v", err)
	}
	bad := errors.New("bad grant")
	if _, err := v.UseApproval(ctx, a.ID, "d1", "e1", func(Approval) error { return bad }); !errors.Is(err, bad) {
		t.Fatalf("check failure: %v", err)
	}
	used, err := v.UseApproval(ctx, a.ID, "d1", "e1", func(a Approval) error {
		if a.GrantMAC != "mac" {
			t.Errorf("mac %q", a.GrantMAC)
		}
		return nil
	})
	if err != nil || used.Status != ApprovalUsed || used.ExecID != "e1" {
		t.Fatalf("use: %+v %v", used, err)
	}
	if _, err := v.UseApproval(ctx, a.ID, "d1", "e2", nil); !wire.HasCode(err, wire.CodeApprovalRejected) {
		t.Fatalf("reuse: %v", err)
	}
	// Denied and expired.
	d, _ := v.CreateApproval(ctx, req)
	v.DecideApproval(ctx, d.ID, false, "no", "alice", "")
	if _, err := v.UseApproval(ctx, d.ID, "d1", "e3", nil); !wire.HasCode(err, wire.CodeApprovalRejected) {
		t.Fatalf("use denied: %v", err)
	}
	req.TTL = time.Millisecond
	x, _ := v.CreateApproval(ctx, req)
	time.Sleep(5 * time.Millisecond)
	if got, _ := v.Approval(ctx, x.ID); got.Status != ApprovalExpired {
		t.Fatalf("expired status %q", got.Status)
	}
	if _, err := v.DecideApproval(ctx, x.ID, true, "", "alice", ""); !wire.HasCode(err, wire.CodeApprovalRejected) {
		t.Fatalf("grant expired: %v", err)
	}
	if _, err := v.Approval(ctx, "ap-nope"); !wire.HasCode(err, wire.CodeApprovalNotFound) {
		t.Fatalf("missing: %v", err)
	}
	all, _ := v.Approvals(ctx, "")
	pending, _ := v.Approvals(ctx, ApprovalExpired)
	if len(all) != 3 || len(pending) != 1 {
		t.Fatalf("list %d, expired %d", len(all), len(pending))
	}
	if rep, _ := v.VerifyAudit(ctx); !rep.OK {
		t.Fatal("audit")
	}
}
