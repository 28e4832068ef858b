package vault

import (
	"context"
	"os"
	"time"

	"avfs/wire"
)

// PreviewRef is what an approval of a previewed run records of it: the
// throwaway fork the command ran in, whose changes granting applies.
type PreviewRef struct {
	Fork string `json:"fork"`
	UUID string `json:"fork_uuid"` // the fork's own, so a vault of the same name made later is never taken for it
}

// SettleApproval does what a decided approval of held or previewed
// changes asks, after DecideApproval: granted, the changes are applied
// exactly as the run left them, nothing runs again (held changes:
// ApplyHeld; a preview: the fork is merged into v with MergeOptions.Unmoved,
// then deleted); denied, a preview's fork is deleted (DecideApproval
// already dropped held changes). It returns what changed in v. An
// approval of neither kind does nothing. check, when not nil, verifies a
// grant's proof first.
//
// Errors: conflict when v changed since the changes were computed (then
// nothing is applied and the approval stays granted, so a person sees it;
// the command must run again), approval_rejected (not granted, expired),
// vault_busy, and the merge's own. A failure to delete a fork after a
// successful merge is not an error: the fork stays, and `vault delete`
// removes it.
func (s *Store) SettleApproval(ctx context.Context, v *Vault, a Approval, check func(Approval) error) ([]wire.Change, error) {
	switch {
	case a.Request.Held != nil && a.Status == ApprovalGranted:
		res, err := v.ApplyHeld(ctx, a.ID, check)
		return WireChanges(res.Changes), err
	case a.Request.Preview != nil && a.Status == ApprovalGranted:
		return s.applyPreview(ctx, v, a, check)
	case a.Request.Preview != nil && a.Status == ApprovalDenied:
		return nil, s.dropPreview(ctx, a.Request.Preview)
	}
	return nil, nil
}

// applyPreview merges the preview's fork into v if v has not moved since
// the fork was made, marks the approval used and deletes the fork.
func (s *Store) applyPreview(ctx context.Context, v *Vault, a Approval, check func(Approval) error) ([]wire.Change, error) {
	if check != nil {
		if err := check(a); err != nil {
			return nil, err
		}
	}
	if time.Now().After(a.ExpiresAt) {
		return nil, wire.Errorf(wire.CodeApprovalRejected, "approval %s expired at %s", a.ID, a.ExpiresAt.UTC().Format(time.RFC3339)).With("approval", a.ID)
	}
	ref := a.Request.Preview
	fv, err := s.Open(ctx, ref.Fork)
	if err != nil {
		return nil, err
	}
	info, err := fv.Info(ctx)
	fv.Close()
	if err != nil {
		return nil, err
	}
	if info.UUID != ref.UUID {
		return nil, wire.Errorf(wire.CodeApprovalRejected, "approval %s: vault %q is not the fork its preview ran in (it was replaced)", a.ID, ref.Fork).With("approval", a.ID)
	}
	res, err := s.Merge(ctx, ref.Fork, MergeOptions{Unmoved: true})
	if err != nil {
		return nil, err
	}
	if err := v.update(ctx, "use approval", func(t *txn) error {
		if _, err := t.tx.ExecContext(ctx, "UPDATE approvals SET status = ?, used_ns = ? WHERE id = ?", ApprovalUsed, t.now, a.ID); err != nil {
			return err
		}
		t.audit("preview.apply", a.Request.Cwd, map[string]any{"approval": a.ID, "fork": ref.Fork, "changes": len(res.Changes)})
		return nil
	}); err != nil {
		return nil, err
	}
	_ = s.dropPreview(ctx, ref)
	return res.Changes, nil
}

// dropPreview deletes the preview's fork, if it is still that fork.
func (s *Store) dropPreview(ctx context.Context, ref *PreviewRef) error {
	fv, err := s.Open(ctx, ref.Fork)
	if err != nil {
		if wire.HasCode(err, wire.CodeVaultNotFound) {
			return nil
		}
		return err
	}
	info, err := fv.Info(ctx)
	fv.Close()
	if err != nil || info.UUID != ref.UUID {
		return err
	}
	return s.Delete(ctx, ref.Fork, false)
}

// DropExpiredPreviews deletes the forks of v's previewed runs whose
// approvals expired (ExpiredPreviews), if they are still those forks, and
// returns how many it deleted. avfs gc runs it.
func (s *Store) DropExpiredPreviews(ctx context.Context, v *Vault) (int, error) {
	as, err := v.ExpiredPreviews(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range as {
		if _, err := os.Lstat(s.PathOf(a.Request.Preview.Fork)); err != nil {
			continue // gone already
		}
		if err := s.dropPreview(ctx, a.Request.Preview); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
