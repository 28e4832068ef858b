package vault

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"avfs/wire"
)

// Checkpoint is a saved state of the vault that it can be restored to.
type Checkpoint struct {
	ID          int64     `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
	Files       int64     `json:"files"`
	Bytes       int64     `json:"bytes"`
	Generation  int64     `json:"generation"`
}

// validCheckpointName checks a checkpoint name; names that are all digits
// are refused because they read as ids.
func validCheckpointName(name string) error {
	ok := len(name) >= 1 && len(name) <= 128
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == ':' || c == '-')
	}
	if !ok {
		return wire.Errorf(wire.CodeInvalidInput, "invalid checkpoint name %q: use 1-128 letters, digits, '.', '_', ':' or '-'", name)
	}
	if _, err := strconv.ParseInt(name, 10, 64); err == nil {
		return wire.Errorf(wire.CodeInvalidInput, "invalid checkpoint name %q: a name cannot be a number (numbers are ids)", name)
	}
	return nil
}

// SaveCheckpoint records the current state. It costs O(1): the current
// generation becomes the checkpoint and a new one starts. The checkpoint
// also records the audit chain's head (the last row's id, hash and MAC)
// as committed before it, which VerifyAudit checks later.
func (v *Vault) SaveCheckpoint(ctx context.Context, name, description string) (Checkpoint, error) {
	if name != "" {
		if err := validCheckpointName(name); err != nil {
			return Checkpoint{}, err
		}
	}
	var cp Checkpoint
	err := v.update(ctx, "save checkpoint", func(t *txn) (err error) {
		cp, err = t.saveCheckpoint(name, description)
		return err
	})
	return cp, err
}

// SaveCheckpointMarked is SaveCheckpoint and Mark in one transaction: the
// mark is at the checkpoint's generation (what changed since the mark is
// what changed since the checkpoint), and pins the checkpoint. While the
// mark is held by the run under way (the live holder of LockRun, which a
// caller must hold), DeleteCheckpoint refuses the checkpoint with
// checkpoint_pinned and PruneCheckpoints skips it, so that the run can
// still roll back to it; gc never deletes checkpoints. Releasing the mark
// (Release) unpins it. A run killed holding the mark pins it no longer:
// the next delete, prune or gc drops the marks of runs that are gone, and
// the next run drops every mark left (ReleaseMarks).
func (v *Vault) SaveCheckpointMarked(ctx context.Context, name, description, purpose string) (Checkpoint, Mark, error) {
	if name != "" {
		if err := validCheckpointName(name); err != nil {
			return Checkpoint{}, Mark{}, err
		}
	}
	var cp Checkpoint
	var m Mark
	err := v.update(ctx, "save checkpoint", func(t *txn) error {
		r, err := t.tx.ExecContext(ctx, "INSERT INTO marks (gen, created_ns, purpose) VALUES (?, ?, ?)", t.st.gen, t.now, purpose)
		if err != nil {
			return err
		}
		m.ID, _ = r.LastInsertId()
		m.Generation = t.st.gen
		cp, err = t.saveCheckpoint(name, description)
		return err
	})
	return cp, m, err
}

// saveCheckpoint records the current generation as a checkpoint in t and
// starts a new one.
func (t *txn) saveCheckpoint(name, description string) (Checkpoint, error) {
	ctx := t.ctx
	var nameArg any
	if name != "" {
		nameArg = name
	}
	// The audit chain's head as committed before this transaction: audit
	// verify checks that it is still in the chain, unchanged.
	headMAC := []byte{}
	if t.st.auditID > 0 {
		if err := t.tx.QueryRowContext(ctx, "SELECT mac FROM audit WHERE id = ?", t.st.auditID).Scan(&headMAC); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return Checkpoint{}, err
		}
	}
	r, err := t.tx.ExecContext(ctx, "INSERT INTO checkpoints (name, description, gen, created_ns, files, bytes, audit_id, audit_hash, audit_mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		nameArg, description, t.st.gen, t.now, t.st.files, t.st.bytes, t.st.auditID, []byte(t.st.auditHash), headMAC)
	if err != nil {
		var n int
		if qerr := t.tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM checkpoints WHERE name = ?", name).Scan(&n); qerr == nil && n > 0 {
			return Checkpoint{}, wire.Errorf(wire.CodeAlreadyExists, "a checkpoint named %q exists", name).With("checkpoint", name)
		}
		return Checkpoint{}, err
	}
	id, _ := r.LastInsertId()
	cp := Checkpoint{ID: id, Name: name, Description: description, CreatedAt: time.Unix(0, t.now), Files: t.st.files, Bytes: t.st.bytes, Generation: t.st.gen}
	t.st.gen++
	t.audit("checkpoint.save", "/", map[string]any{"id": id, "name": name})
	return cp, nil
}

const checkpointCols = "id, COALESCE(name, ''), description, created_ns, files, bytes, gen"

func scanCheckpoint(sc interface{ Scan(...any) error }) (Checkpoint, error) {
	var cp Checkpoint
	var ns int64
	err := sc.Scan(&cp.ID, &cp.Name, &cp.Description, &ns, &cp.Files, &cp.Bytes, &cp.Generation)
	cp.CreatedAt = time.Unix(0, ns)
	return cp, err
}

// Checkpoints lists the checkpoints, oldest first.
func (v *Vault) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	var out []Checkpoint
	err := v.view(ctx, "list checkpoints", func(q querier, _ state) (err error) {
		out, err = listCheckpoints(ctx, q)
		return err
	})
	return out, err
}

// listCheckpoints returns every checkpoint, oldest first.
func listCheckpoints(ctx context.Context, q querier) ([]Checkpoint, error) {
	rows, err := q.QueryContext(ctx, "SELECT "+checkpointCols+" FROM checkpoints ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Checkpoint{}
	for rows.Next() {
		cp, err := scanCheckpoint(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, cp)
	}
	return out, rows.Err()
}

// findCheckpoint looks a checkpoint up by id (a number) or name.
func findCheckpoint(ctx context.Context, q querier, ref string) (Checkpoint, error) {
	var row *sql.Row
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		row = q.QueryRowContext(ctx, "SELECT "+checkpointCols+" FROM checkpoints WHERE id = ?", id)
	} else {
		row = q.QueryRowContext(ctx, "SELECT "+checkpointCols+" FROM checkpoints WHERE name = ?", ref)
	}
	cp, err := scanCheckpoint(row)
	if errors.Is(err, sql.ErrNoRows) {
		return cp, wire.Errorf(wire.CodeCheckpointNotFound, "no checkpoint %q", ref).With("checkpoint", ref)
	}
	return cp, err
}

// Checkpoint returns the checkpoint with that id or name.
func (v *Vault) Checkpoint(ctx context.Context, ref string) (Checkpoint, error) {
	var cp Checkpoint
	err := v.view(ctx, "find checkpoint", func(q querier, _ state) error {
		var err error
		cp, err = findCheckpoint(ctx, q, ref)
		return err
	})
	return cp, err
}

// RestoreResult says what a restore changed.
type RestoreResult struct {
	Checkpoint Checkpoint `json:"checkpoint"`
	Changes    []Change   `json:"changes"`
}

// RestoreCheckpoint returns the vault to the state saved in checkpoint ref,
// in one transaction: a crash leaves the old state or the new one. Its cost
// grows with the changes since the checkpoint, not the vault's size. Later
// checkpoints stay restorable.
func (v *Vault) RestoreCheckpoint(ctx context.Context, ref string) (RestoreResult, error) {
	return v.RestoreCheckpointWith(ctx, ref, RestoreOptions{})
}

// RestoreOptions says how RestoreCheckpoint reports its work.
type RestoreOptions struct {
	// Progress is told, once the changes are known and the rows
	// reinstated, the entries changed since the checkpoint whose history
	// the restore records (items; no bytes: no content is copied),
	// against their number.
	Progress ProgressFunc
}

// RestoreCheckpointWith is RestoreCheckpoint, reporting as opt says.
func (v *Vault) RestoreCheckpointWith(ctx context.Context, ref string, opt RestoreOptions) (RestoreResult, error) {
	var res RestoreResult
	var total Work // for opt.Progress
	err := v.update(ctx, "restore checkpoint", func(t *txn) error {
		if err := refuseIfMounted(t, "restore"); err != nil {
			return err
		}
		cp, err := findCheckpoint(ctx, t.tx, ref)
		if err != nil {
			return err
		}
		if err := refuseHeldCheckpoint(t, cp); err != nil {
			return err
		}
		res.Checkpoint = cp
		changes, err := t.restoreGen(cp.Generation, opt.Progress, &total)
		if err != nil {
			return err
		}
		res.Changes = changes
		t.audit("checkpoint.restore", "/", map[string]any{"id": cp.ID, "name": cp.Name, "changes": len(changes)})
		return nil
	})
	if err == nil {
		opt.Progress.report(total, total)
	}
	return res, err
}

// restoreGen returns the vault's current state to the state at generation
// g, in t, and lists what that changed (Diff from now to g). It records
// the history of every inode it changes; the caller sets the file and byte
// counts and audits. g may be older or newer than the current state (a
// held run's changes are brought forward this way: ApplyHeld), as long as
// a checkpoint or mark pins it. progress is told the entries done against
// *total.
func (t *txn) restoreGen(g int64, progress ProgressFunc, total *Work) ([]Change, error) {
	ctx := t.ctx
	G := t.st.gen
	changes, err := diffGens(ctx, t.tx, G, g)
	if err != nil {
		return nil, err
	}
	// Inodes whose live row differs from the checkpoint, for history.
	affected, err := changedInodes(ctx, t.tx, g, G)
	if err != nil {
		return nil, err
	}
	// The usage counters at g: those of now, less the live inodes that
	// changed after g, plus the rows of g that are no longer live. Only
	// the changed rows are read.
	var nowN, nowBytes, thenN, thenBytes int64
	if err := t.tx.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(CASE WHEN kind = ? THEN size END), 0) FROM inodes WHERE gen_to = ? AND gen_from > ?",
		KindFile, live, g).Scan(&nowN, &nowBytes); err != nil {
		return nil, err
	}
	if err := t.tx.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(CASE WHEN kind = ? THEN size END), 0) FROM inodes WHERE gen_from <= ? AND gen_to > ? AND gen_to < ?",
		KindFile, g, g, live).Scan(&thenN, &thenBytes); err != nil {
		return nil, err
	}
	t.st.files += thenN - nowN
	t.st.bytes += thenBytes - nowBytes
	for _, tbl := range []string{"inodes", "dentries"} {
		cols := inodeCols
		sel := "ino, ?, kind, mode, uid, gid, size, nlink, mtime_ns, ctime_ns, atime_ns, target, chunks, xattrs"
		if tbl == "dentries" {
			cols, sel = "parent, name, gen_from, ino", "parent, name, ?, ino"
		}
		if _, err := t.tx.ExecContext(ctx, "DELETE FROM "+tbl+" WHERE gen_to = ? AND gen_from = ? AND gen_from > 1", live, G); err != nil {
			return nil, err
		}
		if _, err := t.tx.ExecContext(ctx, "UPDATE "+tbl+" SET gen_to = ? WHERE gen_to = ? AND gen_from > ? AND gen_from > 1", G, live, g); err != nil {
			return nil, err
		}
		if _, err := t.tx.ExecContext(ctx, "INSERT INTO "+tbl+" ("+cols+") SELECT "+sel+" FROM "+tbl+" WHERE gen_to > ? AND gen_to < ? AND gen_from <= ?", G, g, live, g); err != nil {
			return nil, err
		}
	}
	t.pathsChanged() // entries came back or went: directory paths may differ
	*total = Work{Items: int64(len(affected))}
	progress.report(Work{}, *total)
	for i, ino := range affected {
		if i > 0 {
			progress.report(Work{Items: int64(i)}, *total)
		}
		in, err := getInode(ctx, t.tx, ino.ino)
		switch {
		case err == nil:
			if err := t.recordVersionAt(in, "", "restore"); err != nil {
				return nil, err
			}
		case wire.HasCode(err, wire.CodeNotFound):
			if ino.kind != KindDir && ino.path != "" {
				gone := &inode{ino: ino.ino, kind: ino.kind, mode: ino.mode, size: ino.size, target: ino.target, chunks: ino.chunks}
				if err := t.recordVersionAt(gone, ino.path, "delete"); err != nil {
					return nil, err
				}
			}
		default:
			return nil, err
		}
	}
	return changes, nil
}

type changedIno struct {
	ino    int64
	kind   Kind
	mode   uint32
	size   int64
	target string
	chunks []byte
	path   string
}

// changedInodes lists the inodes live now whose rows changed after gen g,
// and those that existed at g but not now, with their current paths.
func changedInodes(ctx context.Context, q querier, g, G int64) ([]changedIno, error) {
	inos, err := queryInts(ctx, q, `SELECT ino FROM inodes WHERE gen_to = ? AND gen_from > ? AND gen_from > 1
		UNION SELECT ino FROM inodes WHERE gen_to > ? AND gen_to < ? AND gen_from <= ?`, live, g, g, live, g)
	if err != nil {
		return nil, err
	}
	out := make([]changedIno, 0, len(inos))
	paths := newPathResolver(ctx, q, live-1, live-1) // the live rows: each inode's path once, however deep
	for _, ino := range inos {
		c := changedIno{ino: ino}
		if in, err := getInode(ctx, q, ino); err == nil {
			c.kind, c.mode, c.size, c.target, c.chunks = in.kind, in.mode, in.size, in.target, in.chunks
			c.path, _ = paths.of(ino)
		}
		out = append(out, c)
	}
	return out, nil
}

// DeleteCheckpoint removes checkpoint ref and the old rows only it kept.
// It fails with checkpoint_pinned, deleting nothing, while a run under way
// pins the checkpoint (see SaveCheckpointMarked); marks of runs that are
// gone are dropped first, in the same transaction.
func (v *Vault) DeleteCheckpoint(ctx context.Context, ref string) (Checkpoint, error) {
	var cp Checkpoint
	err := v.update(ctx, "delete checkpoint", func(t *txn) error {
		var err error
		if cp, err = findCheckpoint(ctx, t.tx, ref); err != nil {
			return err
		}
		run, _, err := releaseDeadMarks(t)
		if err != nil {
			return err
		}
		if h, err := pinnedBy(ctx, t.tx, cp, run); err != nil || h != nil {
			if err == nil {
				err = pinnedErr(cp, h)
			}
			return err
		}
		if _, err := t.tx.ExecContext(ctx, "DELETE FROM checkpoints WHERE id = ?", cp.ID); err != nil {
			return err
		}
		if err := dropUnpinnedRows(ctx, t.tx, cp.Generation); err != nil {
			return err
		}
		t.audit("checkpoint.delete", "/", map[string]any{"id": cp.ID, "name": cp.Name})
		return nil
	})
	return cp, err
}

// PruneCheckpoints deletes, in one transaction, the checkpoints beyond the
// newest keep (keep < 0: no such limit) that were also made before before
// (zero: at any time), oldest first, and returns them. At least one of the
// two limits must be given. Checkpoints a run under way pins (see
// SaveCheckpointMarked) are kept, whatever the limits, and returned as
// pinned; marks of runs that are gone are dropped first.
func (v *Vault) PruneCheckpoints(ctx context.Context, keep int, before time.Time) (deleted, pinned []Checkpoint, err error) {
	if keep < 0 && before.IsZero() {
		return nil, nil, wire.Errorf(wire.CodeInvalidInput, "prune checkpoints: give the number to keep or an age")
	}
	deleted, pinned = []Checkpoint{}, []Checkpoint{}
	err = v.update(ctx, "prune checkpoints", func(t *txn) error {
		all, err := listCheckpoints(ctx, t.tx)
		if err != nil {
			return err
		}
		run, _, err := releaseDeadMarks(t)
		if err != nil {
			return err
		}
		for i, cp := range all {
			newer := len(all) - 1 - i // checkpoints made after this one
			if (keep >= 0 && newer < keep) || (!before.IsZero() && !cp.CreatedAt.Before(before)) {
				continue
			}
			if h, err := pinnedBy(ctx, t.tx, cp, run); err != nil {
				return err
			} else if h != nil {
				pinned = append(pinned, cp)
				continue
			}
			if _, err := t.tx.ExecContext(ctx, "DELETE FROM checkpoints WHERE id = ?", cp.ID); err != nil {
				return err
			}
			if err := dropUnpinnedRows(ctx, t.tx, cp.Generation); err != nil {
				return err
			}
			t.audit("checkpoint.delete", "/", map[string]any{"id": cp.ID, "name": cp.Name, "pruned": true})
			deleted = append(deleted, cp)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return deleted, pinned, nil
}

// dropUnpinnedRows deletes closed rows visible at gen g (or at any gen when
// g is 0) that no checkpoint, fork or mark needs any more.
func dropUnpinnedRows(ctx context.Context, q querier, g int64) error {
	for _, tbl := range []string{"inodes", "dentries"} {
		cond, args := unpinnedRows(tbl, nil, false)
		if g > 0 {
			cond += " AND gen_from <= ? AND gen_to > ?"
			args = append(args, g, g)
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM `+tbl+` WHERE `+cond, args...); err != nil {
			return err
		}
	}
	return nil
}

// unpinnedRows returns the SQL condition, and its arguments, that selects
// the rows of tbl (inodes or dentries) no longer needed: closed rows
// visible at no generation a checkpoint, fork pin or mark holds. The pins
// of the forks whose uuids are in ignorePins are taken as released, and
// with ignoreMarks every mark too (a dry run of gc, which drops those of
// killed runs first). It is
// the one definition of such rows, for deleting them and for counting
// them (gc and its dry run).
func unpinnedRows(tbl string, ignorePins []string, ignoreMarks bool) (string, []any) {
	args := []any{live}
	forks := ""
	if len(ignorePins) > 0 {
		forks = " AND f.uuid NOT IN (?" + strings.Repeat(", ?", len(ignorePins)-1) + ")"
		for _, u := range ignorePins {
			args = append(args, u)
		}
	}
	marks := `
			AND NOT EXISTS (SELECT 1 FROM marks m WHERE m.gen >= ` + tbl + `.gen_from AND m.gen < ` + tbl + `.gen_to)`
	if ignoreMarks {
		marks = ""
	}
	return `gen_to < ?
			AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.gen >= ` + tbl + `.gen_from AND c.gen < ` + tbl + `.gen_to)
			AND NOT EXISTS (SELECT 1 FROM forks f WHERE f.gen >= ` + tbl + `.gen_from AND f.gen < ` + tbl + `.gen_to` + forks + `)` + marks, args
}
