package vault

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"time"

	"avfs/wire"
)

// ContentHash identifies the content the reader reads: "sha256:" and the
// hex SHA-256 of a file's chunk hashes in order (equal content, equal
// hash, whatever its history), or of a symlink's target. It reads nothing.
func (r *FileReader) ContentHash() string {
	h := sha256.New()
	if r.in != nil {
		h.Write(r.in.chunks)
	} else {
		h.Write(r.lit)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// ChangesSinceContent calls fn, in path order, with each change since the
// mark (ChangesSince's list) and readers of the content on each side, as
// DiffContent does between checkpoints: one snapshot, readers valid until
// fn returns. A released mark is invalid_input.
func (v *Vault) ChangesSinceContent(ctx context.Context, m Mark, fn func(ContentChange) error) error {
	return v.diffContent(ctx, "list changes", "/", func(q querier, st state) (int64, int64, error) {
		gen, err := markGen(ctx, q, m)
		return gen, st.gen, err
	}, fn)
}

// Held is where a run's held changes wait for an approval (HoldChanges):
// the checkpoint of the state the run left, and the checkpoint of the
// state the vault went back to. Both are ordinary checkpoints (listed,
// named "held-TAG" and "base-TAG"), so nothing else frees their rows.
type Held struct {
	Held Checkpoint `json:"held"`
	Base Checkpoint `json:"base"`
}

// HeldRef is what an approval of held changes records of them: the names
// of their checkpoints (unique, as execution ids are; a checkpoint's id
// may be reused once it is deleted).
type HeldRef struct {
	Held string `json:"held_checkpoint"`
	Base string `json:"base_checkpoint"`
}

// HoldChanges sets a run's changes aside, in one transaction: it saves the
// current state as checkpoint "held-TAG", returns the vault to the state
// of mark m (the run's start; as RestoreCheckpoint does, history and audit
// included) and saves that as "base-TAG". The vault is then as before the
// run; ApplyHeld later brings the held state back exactly (no re-run),
// DiscardHeld drops it. Cost: two O(1) checkpoints and a restore that
// grows with the run's changes. It fails with invalid_input for a
// released mark, and as RestoreCheckpoint does (vault_busy under another
// process's writer mount); on failure nothing changed.
func (v *Vault) HoldChanges(ctx context.Context, m Mark, tag string) (Held, RestoreResult, error) {
	var h Held
	var res RestoreResult
	err := v.update(ctx, "hold changes", func(t *txn) error {
		if err := refuseIfMounted(t, "hold changes"); err != nil {
			return err
		}
		gen, err := markGen(ctx, t.tx, m)
		if err != nil {
			return err
		}
		if h.Held, err = t.saveCheckpoint("held-"+tag, "changes of "+tag+" held for approval"); err != nil {
			return err
		}
		var total Work
		if res.Changes, err = t.restoreGen(gen, nil, &total); err != nil {
			return err
		}
		if h.Base, err = t.saveCheckpoint("base-"+tag, "the vault without the held changes of "+tag); err != nil {
			return err
		}
		res.Checkpoint = h.Base
		t.audit("effects.hold", "/", map[string]any{"tag": tag, "held": h.Held.ID, "base": h.Base.ID, "changes": len(res.Changes)})
		return nil
	})
	return h, res, err
}

// ApplyHeld makes the held changes of approval id the vault's, in one
// transaction: the approval must be granted (check, when not nil, verifies
// the grant's proof first) and hold changes; the vault must not have
// moved since they were held (its state is still the base checkpoint's),
// else it fails with conflict and changes nothing. Then the vault takes
// the held state exactly (the bytes the run wrote; nothing runs again),
// the approval is used, and both checkpoints are deleted. Errors:
// approval_not_found, approval_rejected (pending, denied, used, expired,
// no held changes), conflict, checkpoint_not_found when a checkpoint was
// deleted by hand, vault_busy under another process's writer mount.
func (v *Vault) ApplyHeld(ctx context.Context, id string, check func(Approval) error) (RestoreResult, error) {
	var res RestoreResult
	err := v.update(ctx, "apply held changes", func(t *txn) error {
		if err := refuseIfMounted(t, "apply held changes"); err != nil {
			return err
		}
		a, err := findApproval(ctx, t.tx, id, time.Unix(0, t.now))
		if err != nil {
			return err
		}
		reject := func(why string) error {
			return wire.Errorf(wire.CodeApprovalRejected, "approval %s cannot apply held changes: %s", id, why).With("approval", id).With("status", a.Status)
		}
		if a.Request.Held == nil {
			return reject("it holds no changes (run the command again with --approval)")
		}
		if a.Status != ApprovalGranted {
			return reject("it is " + a.Status + ", not granted")
		}
		if check != nil {
			if err := check(a); err != nil {
				return err
			}
		}
		held, base, err := heldCheckpoints(t, a.Request.Held)
		if err != nil {
			return err
		}
		moved, err := diffGens(ctx, t.tx, base.Generation, t.st.gen)
		if err != nil {
			return err
		}
		if len(moved) > 0 {
			paths := make([]string, 0, min(len(moved), 20))
			for _, c := range moved[:min(len(moved), 20)] {
				paths = append(paths, c.Path)
			}
			return wire.Errorf(wire.CodeConflict, "approval %s: the vault changed since its changes were held (%d paths, e.g. %s); they are not applied", id, len(moved), paths[0]).
				With("approval", id).With("paths", paths).With("changed", len(moved))
		}
		var total Work
		if res.Changes, err = t.restoreGen(held.Generation, nil, &total); err != nil {
			return err
		}
		res.Checkpoint = held
		if err := t.dropHeld(held, base); err != nil {
			return err
		}
		if _, err := t.tx.ExecContext(ctx, "UPDATE approvals SET status = ?, used_ns = ? WHERE id = ?", ApprovalUsed, t.now, id); err != nil {
			return err
		}
		t.audit("effects.apply", "/", map[string]any{"approval": id, "held": held.ID, "changes": len(res.Changes)})
		return nil
	})
	return res, err
}

// heldCheckpoints finds the two checkpoints of ref.
func heldCheckpoints(t *txn, ref *HeldRef) (held, base Checkpoint, err error) {
	if held, err = findCheckpoint(t.ctx, t.tx, ref.Held); err != nil {
		return
	}
	base, err = findCheckpoint(t.ctx, t.tx, ref.Base)
	return
}

// dropHeld deletes the checkpoints of held changes and the rows only they kept.
func (t *txn) dropHeld(cps ...Checkpoint) error {
	for _, cp := range cps {
		if _, err := t.tx.ExecContext(t.ctx, "DELETE FROM checkpoints WHERE id = ?", cp.ID); err != nil {
			return err
		}
		if err := dropUnpinnedRows(t.ctx, t.tx, cp.Generation); err != nil {
			return err
		}
	}
	return nil
}

// discardHeld drops the held changes of approval a, when it holds any
// whose checkpoints are still there (a denied approval's).
func (t *txn) discardHeld(a Approval) error {
	if a.Request.Held == nil {
		return nil
	}
	held, base, err := heldCheckpoints(t, a.Request.Held)
	if wire.HasCode(err, wire.CodeCheckpointNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := t.dropHeld(held, base); err != nil {
		return err
	}
	t.audit("effects.discard", "/", map[string]any{"approval": a.ID, "held": held.ID})
	return nil
}

// RestoreMark returns the vault to the state of mark m, as
// RestoreCheckpoint does for a checkpoint (one transaction, history and
// audit, refused under another process's writer mount): how a run whose
// changes the effects policy denied is undone. A released mark is
// invalid_input.
func (v *Vault) RestoreMark(ctx context.Context, m Mark, why string) (RestoreResult, error) {
	var res RestoreResult
	err := v.update(ctx, "undo run", func(t *txn) error {
		if err := refuseIfMounted(t, "undo run"); err != nil {
			return err
		}
		gen, err := markGen(ctx, t.tx, m)
		if err != nil {
			return err
		}
		var total Work
		if res.Changes, err = t.restoreGen(gen, nil, &total); err != nil {
			return err
		}
		t.audit("effects.undo", "/", map[string]any{"why": why, "changes": len(res.Changes)})
		return nil
	})
	return res, err
}

// dropExpiredHeld drops the held changes of approvals that expired before
// anyone decided them (or that were granted and not applied in time):
// their checkpoints would keep the run's state forever. It returns how
// many it dropped. gc runs it.
func (t *txn) dropExpiredHeld() (int, error) {
	rows, err := t.tx.QueryContext(t.ctx, "SELECT "+approvalCols+" FROM approvals WHERE status IN (?, ?) AND expires_ns < ?", ApprovalPending, ApprovalGranted, t.now)
	if err != nil {
		return 0, err
	}
	var expired []Approval
	for rows.Next() {
		a, err := scanApproval(rows, time.Unix(0, t.now))
		if err != nil {
			rows.Close()
			return 0, err
		}
		if a.Request.Held != nil {
			expired = append(expired, a)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, a := range expired {
		if err := t.discardHeld(a); err != nil {
			return 0, err
		}
	}
	return len(expired), nil
}

// ExpiredPreviews lists the approvals of previewed runs that expired
// undecided or unapplied: their forks are no longer anyone's
// (DropExpiredPreviews deletes them).
func (v *Vault) ExpiredPreviews(ctx context.Context) ([]Approval, error) {
	as, err := v.Approvals(ctx, ApprovalExpired)
	if err != nil {
		return nil, err
	}
	var out []Approval
	for _, a := range as {
		if a.Request.Preview != nil {
			out = append(out, a)
		}
	}
	return out, nil
}

// refuseHeldCheckpoint fails with approval_rejected when cp keeps changes
// held for an approval not yet settled: restoring it would apply them
// without the approval (an agent's checkpoint_restore, say). Once the
// approval is denied, used or expired, gc or the settlement removes it.
func refuseHeldCheckpoint(t *txn, cp Checkpoint) error {
	if cp.Name == "" {
		return nil
	}
	var id string
	err := t.tx.QueryRowContext(t.ctx, `SELECT id FROM approvals WHERE status IN (?, ?)
		AND json_extract(request, '$.held.held_checkpoint') = ? LIMIT 1`, ApprovalPending, ApprovalGranted, cp.Name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return wire.Errorf(wire.CodeApprovalRejected, "checkpoint %s keeps changes held for approval %s: they apply only when it is granted (avfs approval grant %s)", cp.Name, id, id).
		With("approval", id).With("checkpoint", cp.Name)
}
