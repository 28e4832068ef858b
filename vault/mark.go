package vault

import (
	"context"
	"database/sql"
	"errors"

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

// ChangesSince lists what changed between the mark and now.
func (v *Vault) ChangesSince(ctx context.Context, m Mark) ([]Change, error) {
	var out []Change
	err := v.view(ctx, "list changes", func(q querier, st state) error {
		var gen int64
		err := q.QueryRowContext(ctx, "SELECT gen FROM marks WHERE id = ?", m.ID).Scan(&gen)
		if errors.Is(err, sql.ErrNoRows) {
			return wire.Errorf(wire.CodeInvalidInput, "mark %d was released", m.ID)
		}
		if err != nil {
			return err
		}
		out, err = diffGens(ctx, q, gen, st.gen)
		return err
	})
	return out, err
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
// holders are gone: the runner, once it holds the vault's exec lock (runs
// take marks only under it), drops the marks of runs whose avfs was killed.
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
		gens, err := queryInts(ctx, t.tx, "SELECT DISTINCT gen FROM marks")
		if err != nil {
			return err
		}
		r, err := t.tx.ExecContext(ctx, "DELETE FROM marks")
		if err != nil {
			return err
		}
		m, _ := r.RowsAffected()
		n = int(m)
		for _, g := range gens {
			if err := dropUnpinnedRows(ctx, t.tx, g); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}
