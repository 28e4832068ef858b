package vault

import (
	"context"
	"strings"
)

// ContentChange is one change of Diff with readers of the content on each
// side of it.
type ContentChange struct {
	Change
	// Before and After read the entry's content before and after the
	// change: a file's bytes, a symlink's target. nil when that side has
	// no entry (added, deleted) or the entry has no content (a directory,
	// a fifo, a socket, a device node).
	Before, After *FileReader
}

// DiffContent calls fn, in path order, with each change from checkpoint
// from to checkpoint to (to "": the current state) that Diff lists at the
// path under or beneath it (under "" or "/": all), with readers of the
// content on each side.
//
// It reads one snapshot: a read transaction, held until it returns, on a
// connection of its own set for streaming (as a FileReader's), so writes
// made meanwhile are not seen and what fn reads is consistent with the
// change list. The readers are valid only until fn returns: fn must not
// keep them (closing them is harmless and needless). They read as
// FileReader does, a run of verified chunks at a time, and only what fn
// asks for: DiffContent itself reads no content.
//
// It fails with checkpoint_not_found for an unknown checkpoint,
// invalid_path for a bad path, and as Diff and FileReader do; fn's error ends the walk and is
// returned as it is. Cost: Diff's, then what fn reads.
func (v *Vault) DiffContent(ctx context.Context, from, to, under string, fn func(ContentChange) error) error {
	return v.diffContent(ctx, "diff checkpoints", under, func(q querier, st state) (int64, int64, error) {
		return checkpointSpan(ctx, q, st, from, to)
	}, fn)
}

// diffContent is DiffContent between the generations span finds in the
// snapshot.
func (v *Vault) diffContent(ctx context.Context, op, under string, span func(q querier, st state) (int64, int64, error), fn func(ContentChange) error) error {
	if under == "" {
		under = "/"
	}
	under, err := CleanPath(under)
	if err != nil {
		return err
	}
	conn, tx, err := v.beginStream(ctx, op)
	if err != nil {
		return err
	}
	defer func() {
		_ = tx.Rollback()
		releaseConn(conn)
	}()
	q := cq{tx: tx, c: v.rs}
	var rows []changeRows
	err = func() error {
		st, err := scanState(q.QueryRowContext(ctx, "SELECT "+stateCols+" FROM state WHERE id = 1"))
		if err != nil {
			return err
		}
		ga, gb, err := span(q, st)
		if err != nil {
			return err
		}
		rows, err = diffRows(ctx, q, ga, gb)
		return err
	}()
	if err != nil {
		return wrapOp(op, err)
	}
	reader := func(p string, in *inode) *FileReader {
		r := &FileReader{v: v, ctx: ctx, op: "read " + p, path: p, q: q}
		switch {
		case in == nil:
			return nil
		case in.kind == KindFile:
			r.in = in
		case in.kind == KindSymlink:
			r.lit = []byte(in.target)
		default:
			return nil
		}
		return r
	}
	for _, c := range rows {
		if under != "/" && c.Path != under && !strings.HasPrefix(c.Path, under+"/") {
			continue
		}
		cc := ContentChange{Change: c.Change, Before: reader(c.Path, c.a), After: reader(c.Path, c.b)}
		err := fn(cc)
		for _, r := range []*FileReader{cc.Before, cc.After} {
			if r != nil {
				r.closed, r.buf = true, nil
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
