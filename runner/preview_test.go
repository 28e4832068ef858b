package runner

import (
	"context"
	"testing"

	"avfs/vault"
	"avfs/wire"
)

// previewRunner is newTestRunner with an extension that asks approval for
// any run of tee.
func previewRunner(t *testing.T) *Runner {
	t.Helper()
	return extensionRunner(t, "pv", `reasons contains {"id": "pv.approval.tee", "message": "tee", "decision": "require_approval"} if {
	some cmd in input.commands
	cmd.program == "tee"
}
`)
}

func previewRun(t *testing.T, r *Runner, script string) *wire.Envelope {
	t.Helper()
	env, status := r.Exec(context.Background(), Request{Vault: "default", Shell: script, Cwd: "/", Timeout: DefaultTimeout,
		MountMode: ModeMaterialize, AllowWritableTrust: true, ApprovalTTL: 3600e9, Preview: true})
	if status != wire.ExitNotRun || env.Error != nil || env.Preview == nil || env.Approval == nil || env.Approval.Status != vault.ApprovalPending {
		t.Fatalf("preview: status %d, preview %+v, approval %+v, error %+v", status, env.Preview, env.Approval, env.Error)
	}
	if env.Process == nil || env.Process.ExitCode != 0 || env.ChangesTotal != 2 {
		t.Fatalf("preview ran %+v with %d changes: %+v", env.Process, env.ChangesTotal, env.Changes)
	}
	return env
}

// settle decides approval id in r's default vault and settles it.
func settle(t *testing.T, r *Runner, id string, grant bool) ([]wire.Change, error) {
	t.Helper()
	ctx := context.Background()
	v, err := r.Store.Open(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	a, err := v.DecideApproval(ctx, id, grant, "", "test", "")
	if err != nil {
		t.Fatal(err)
	}
	return r.Store.SettleApproval(ctx, v, a, r.checkGrant)
}

func forkGone(t *testing.T, r *Runner, name string) {
	t.Helper()
	if _, err := r.Store.Open(context.Background(), name); !wire.HasCode(err, wire.CodeVaultNotFound) {
		t.Errorf("fork %s still there: %v", name, err)
	}
}

// A previewed run leaves the vault as it was; granting applies exactly
// what the preview wrote, without a second run; denying drops it; a vault
// that moved meanwhile is a conflict and keeps what it has.
func TestPreview(t *testing.T) {
	const script = `echo hello | tee out.txt > /dev/null && printf 'x' > src/a.txt`
	t.Run("granted", func(t *testing.T) {
		r := previewRunner(t)
		shellRun(t, r, seed)
		before := tree(t, r)
		env := previewRun(t, r, script)
		if got := tree(t, r); !sameEntries(got, before) {
			t.Fatalf("the preview changed the vault: %v", got)
		}
		applied, err := settle(t, r, env.Approval.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		got := tree(t, r)
		if len(applied) != 2 || got["/out.txt"] != "file 0644 hello\n" || got["/src/a.txt"] != "file 0644 x" || got["/keep.txt"] != before["/keep.txt"] {
			t.Fatalf("applied %+v, vault %v", applied, got)
		}
		forkGone(t, r, env.Preview.Fork)
		v, err := r.Store.Open(context.Background(), "default")
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		if a, err := v.Approval(context.Background(), env.Approval.ID); err != nil || a.Status != vault.ApprovalUsed {
			t.Errorf("approval after the grant: %+v %v", a, err)
		}
	})
	t.Run("denied", func(t *testing.T) {
		r := previewRunner(t)
		shellRun(t, r, seed)
		before := tree(t, r)
		env := previewRun(t, r, script)
		if _, err := settle(t, r, env.Approval.ID, false); err != nil {
			t.Fatal(err)
		}
		if got := tree(t, r); !sameEntries(got, before) {
			t.Errorf("after the deny: %v", got)
		}
		forkGone(t, r, env.Preview.Fork)
	})
	t.Run("conflict", func(t *testing.T) {
		r := previewRunner(t)
		shellRun(t, r, seed)
		env := previewRun(t, r, script)
		if _, status := shellRun(t, r, `echo meanwhile > keep.txt`); status != 0 {
			t.Fatalf("second run: %d", status)
		}
		moved := tree(t, r)
		if _, err := settle(t, r, env.Approval.ID, true); !wire.HasCode(err, wire.CodeConflict) {
			t.Fatalf("grant after the vault moved: %v", err)
		}
		if got := tree(t, r); !sameEntries(got, moved) {
			t.Errorf("a refused grant changed the vault: %v", got)
		}
	})
	t.Run("without preview", func(t *testing.T) {
		r := previewRunner(t)
		shellRun(t, r, seed)
		env, status := r.Exec(context.Background(), Request{Vault: "default", Shell: script, Cwd: "/", Timeout: DefaultTimeout,
			MountMode: ModeMaterialize, AllowWritableTrust: true, ApprovalTTL: 3600e9})
		if status != wire.ExitNotRun || env.Process != nil || env.Preview != nil || env.Approval == nil {
			t.Fatalf("status %d, process %+v, preview %+v", status, env.Process, env.Preview)
		}
	})
}
