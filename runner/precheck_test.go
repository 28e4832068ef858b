package runner

import (
	"context"
	"testing"

	"avfs/bundles"
	"avfs/engine"
	"avfs/vault"
	"avfs/wire"
)

// TestPrecheck decides without running: no checkpoint, no change, and
// for require_approval one approval of the run, found again (pending,
// then granted) rather than requested twice.
func TestPrecheck(t *testing.T) {
	ctx := context.Background()
	store := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"})
	r := &Runner{Store: store, RunDir: t.TempDir(), Sandbox: SandboxConfig{Mode: SandboxNone},
		LoadPolicy: func(ctx context.Context) (*engine.Policy, error) {
			set, err := bundles.Load(ctx, bundles.Options{IncludeDefault: true})
			if err != nil {
				return nil, err
			}
			return engine.NewPolicy(ctx, set, engine.PolicyOptions{})
		}}
	req := func(script string) Request {
		return Request{Vault: "default", Argv: []string{}, Shell: script, Cwd: "/", Timeout: DefaultTimeout}
	}
	cases := []struct {
		script string
		want   wire.Decision
	}{
		{"ls", wire.Allow},
		{"echo hi > a.txt", wire.AllowWithCheckpoint},
		{"cat /var/log/syslog", wire.Deny},
	}
	for _, c := range cases {
		pc, err := r.Precheck(ctx, req(c.script))
		if err != nil || pc.Decision != c.want || pc.Approval != nil || pc.Vault != "default" || len(pc.Reasons) == 0 {
			t.Fatalf("%s: %+v %v", c.script, pc, err)
		}
	}
	v, err := store.Open(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	cps, err := v.Checkpoints(ctx)
	if err != nil || len(cps) != 0 {
		t.Fatalf("checkpoints %v %v", cps, err)
	}
	if _, err := v.Stat(ctx, "/a.txt"); err == nil {
		t.Fatal("a precheck ran the command")
	}

	first, err := r.Precheck(ctx, req("curl https://example.com"))
	if err != nil || first.Decision != wire.RequireApproval || first.Approval == nil || first.Approval.Status != vault.ApprovalPending {
		t.Fatalf("require_approval: %+v %v", first, err)
	}
	again, err := r.Precheck(ctx, req("curl https://example.com"))
	if err != nil || again.Approval == nil || again.Approval.ID != first.Approval.ID {
		t.Fatalf("again: %+v %v", again, err)
	}
	other, err := r.Precheck(ctx, req("curl https://example.org"))
	if err != nil || other.Approval == nil || other.Approval.ID == first.Approval.ID {
		t.Fatalf("another command shares the approval: %+v %v", other, err)
	}
	if _, err := v.DecideApproval(ctx, first.Approval.ID, true, "fine", "test", ""); err != nil {
		t.Fatal(err)
	}
	granted, err := r.Precheck(ctx, req("curl https://example.com"))
	if err != nil || granted.Approval == nil || granted.Approval.ID != first.Approval.ID || granted.Approval.Status != vault.ApprovalGranted {
		t.Fatalf("granted: %+v %v", granted, err)
	}
	// A grant that does not verify (the approvers have a key now) is not
	// taken: a new request is made instead.
	keyed := *r
	keyed.ApproverKey = []byte("secret")
	pc, err := keyed.Precheck(ctx, req("curl https://example.com"))
	if err != nil || pc.Approval == nil || pc.Approval.ID == first.Approval.ID || pc.Approval.Status != vault.ApprovalPending {
		t.Fatalf("unverified grant: %+v %v", pc, err)
	}
	all, _ := v.Approvals(ctx, "")
	if len(all) != 3 {
		t.Errorf("%d approvals, want 3", len(all))
	}
}
