package vault

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"avfs/wire"
)

// Mark pins the vault's current state so that Changes can later list what
// changed since, without a checkpoint. It costs O(1). Release it when done.
type Mark struct {
	ID         int64 `json:"id"`
	Generation int64 `json:"generation"`
}

// Mark records the current state (purpose is free text, e.g. an execution id).
func (v *Vault) Mark(ctx context.Context, purpose string) (Mark, error) {
	var m Mark
	err := v.update(ctx, "mark vault", func(t *txn) error {
		r, err := t.tx.ExecContext(ctx, "INSERT INTO marks (gen, created_ns, purpose) VALUES (?, ?, ?)", t.st.gen, t.now, purpose)
		if err != nil {
			return err
		}
		m.ID, _ = r.LastInsertId()
		m.Generation = t.st.gen
		t.st.gen++
		return nil
	})
	return m, err
}

// ChangesSince lists what changed between the mark and now, sorted by
// path. A released mark is invalid_input.
//
// Cost: one read transaction, and that of diffGens: a few set-based
// queries over the rows changed since the mark, never one per file or
// path, so it grows with what the run changed, not with the size of the
// vault (20,000 files created or deleted: see docs/benchmarks.md, "Change
// summary of a large run"). It never writes.
func (v *Vault) ChangesSince(ctx context.Context, m Mark) ([]Change, error) {
	var out []Change
	err := v.view(ctx, "list changes", func(q querier, st state) error {
		gen, err := markGen(ctx, q, m)
		if err != nil {
			return err
		}
		out, err = diffGens(ctx, q, gen, st.gen)
		return err
	})
	return out, err
}

// markGen is the generation mark m pins; invalid_input once it was released.
func markGen(ctx context.Context, q querier, m Mark) (int64, error) {
	var gen int64
	err := q.QueryRowContext(ctx, "SELECT gen FROM marks WHERE id = ?", m.ID).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, wire.Errorf(wire.CodeInvalidInput, "mark %d was released", m.ID)
	}
	return gen, err
}

// Release drops the mark and the old rows only it kept.
func (v *Vault) Release(ctx context.Context, m Mark) error {
	return v.update(ctx, "release mark", func(t *txn) error {
		if _, err := t.tx.ExecContext(ctx, "DELETE FROM marks WHERE id = ?", m.ID); err != nil {
			return err
		}
		return dropUnpinnedRows(ctx, t.tx, m.Generation)
	})
}

// ReleaseMarks drops every mark and the old rows only they kept, and
// returns how many there were. It is for a caller that knows the marks'
// holders are gone: the runner, once it holds LockRun (runs take marks
// only under it), drops the marks of runs whose avfs was killed, and with
// them their pins of checkpoints (see SaveCheckpointMarked).
//
// When there are none — every run but the first after a killed one — it
// only reads: a write transaction (the vault's write lock, a commit) for
// nothing cost every run a few hundred microseconds.
func (v *Vault) ReleaseMarks(ctx context.Context) (int, error) {
	var some bool
	if err := v.view(ctx, "release marks", func(q querier, _ state) error {
		return q.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM marks)").Scan(&some)
	}); err != nil || !some {
		return 0, err
	}
	var n int
	err := v.update(ctx, "release marks", func(t *txn) error {
		var err error
		n, err = dropMarks(ctx, t.tx)
		return err
	})
	return n, err
}

// dropMarks deletes every mark and the old rows only they kept, and
// returns how many there were.
func dropMarks(ctx context.Context, q querier) (int, error) {
	gens, err := queryInts(ctx, q, "SELECT DISTINCT gen FROM marks")
	if err != nil {
		return 0, err
	}
	r, err := q.ExecContext(ctx, "DELETE FROM marks")
	if err != nil {
		return 0, err
	}
	n, _ := r.RowsAffected()
	for _, g := range gens {
		if err := dropUnpinnedRows(ctx, q, g); err != nil {
			return 0, err
		}
	}
	return int(n), nil
}

// runUnderWay returns the live holder of LockRun: the run whose marks
// those of the vault are. nil means no run is under way and every mark
// is a killed run's.
func runUnderWay(ctx context.Context, q querier) (*Holder, error) {
	h, err := lockHolder(ctx, q, LockRun)
	if err != nil || h == nil || !h.alive() {
		return nil, err
	}
	return h, nil
}

// releaseDeadMarks drops, in t, the marks killed runs left (every mark,
// while no run is under way: see runUnderWay), with their pins of
// checkpoints, and returns the run under way (nil for none) and how many
// marks it dropped. Deletes of checkpoints and gc call it, so that a run
// killed with its checkpoint pinned pins it no longer once it is gone,
// whether or not another run comes.
func releaseDeadMarks(t *txn) (*Holder, int, error) {
	h, err := runUnderWay(t.ctx, t.tx)
	if err != nil || h != nil {
		return h, 0, err
	}
	n, err := dropMarks(t.ctx, t.tx)
	if n > 0 {
		t.audit("vault.marks_released", "/", map[string]any{"marks": n, "reason": "no run is under way"})
	}
	return nil, n, err
}

// pinnedBy returns the run that pins cp, or nil: a mark at cp's
// generation (see SaveCheckpointMarked) held by run, the run under way.
func pinnedBy(ctx context.Context, q querier, cp Checkpoint, run *Holder) (*Holder, error) {
	if run == nil {
		return nil, nil
	}
	var pinned bool
	if err := q.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM marks WHERE gen = ?)", cp.Generation).Scan(&pinned); err != nil || !pinned {
		return nil, err
	}
	return run, nil
}

// pinnedErr is the checkpoint_pinned error of deleting cp, pinned by run.
func pinnedErr(cp Checkpoint, run *Holder) error {
	label := strconv.FormatInt(cp.ID, 10)
	if cp.Name != "" {
		label += " (" + cp.Name + ")"
	}
	return wire.Errorf(wire.CodeCheckpointPinned, "checkpoint %s is pinned by the run under way (%s, pid %d on %s): it is what that run rolls back to; delete it once the run has ended",
		label, run.Info, run.PID, run.Host).With("checkpoint", cp.ID).With("holder_pid", run.PID).With("exec_id", run.Info)
}
