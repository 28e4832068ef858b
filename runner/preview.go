package runner

import (
	"context"
	"fmt"

	"avfs/vault"
	"avfs/wire"
)

// previewFork moves a previewed run (a require_approval decision with
// Request.Preview or the decision's sandbox.preview) to a throwaway fork
// of its vault, O(1): the command runs there with the network off (the
// decision grants none without an approval), the vault itself untouched
// even if avfs is killed, and previewApproval then asks approval for
// exactly what the fork holds. The fork is named "preview-" and the
// execution id; it is deleted when the run ends without an approval that
// refers to it.
func (x *execution) previewFork(ctx context.Context) error {
	if !x.preview {
		return nil
	}
	name := "preview-" + x.out.ID
	if _, err := x.r.Store.ForkInfo(ctx, x.info.Name, name); err != nil {
		return fmt.Errorf("proxy exec: preview: %w", err)
	}
	kept := false
	x.later(func(ctx context.Context) {
		if !kept {
			_ = x.r.Store.Delete(ctx, name, false)
		}
	})
	fv, err := x.r.Store.Open(ctx, name)
	if err != nil {
		return fmt.Errorf("proxy exec: preview: %w", err)
	}
	x.later(func(context.Context) { fv.Close() })
	info, err := fv.Info(ctx)
	if err != nil {
		return err
	}
	x.parent, x.v, x.info = x.v, fv, info
	x.out.Preview = &wire.PreviewReport{Fork: name}
	x.keepPreview = func() { kept = true }
	return nil
}

// previewApproval asks approval, in the vault the preview was forked
// from, for the changes the previewed command made in its fork: granting
// merges exactly them (vault.Store.SettleApproval), if the vault did not
// change meanwhile; denying deletes the fork. A run whose changes the
// effects policy undid asks nothing: there is nothing to apply.
func (x *execution) previewApproval(ctx context.Context) error {
	if !x.preview || !x.ran {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	x.status = wire.ExitNotRun
	if e := x.out.Effects; e != nil && e.Outcome == wire.EffectsUndone {
		return nil
	}
	info := x.info
	req := x.req
	a, err := x.parent.CreateApproval(ctx, vault.ApprovalRequest{Argv: req.Argv, Shell: req.Shell, Cwd: x.cwd, Env: req.Env, Vault: req.Vault,
		BundleRevision: revisions(x.res.Bundles), Reasons: reasonIDs(x.res.Reasons), Digest: x.digest, TTL: req.ApprovalTTL,
		Preview: &vault.PreviewRef{Fork: info.Name, UUID: info.UUID}})
	if err != nil {
		return fmt.Errorf("ask approval for the preview: %w", err)
	}
	x.keepPreview()
	x.out.Approval = &wire.ApprovalRef{ID: a.ID, Status: a.Status, ExpiresAt: a.ExpiresAt.UTC()}
	return nil
}
