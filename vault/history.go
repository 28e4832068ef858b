package vault

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"time"

	"avfs/wire"
)

// Version is one recorded state of a file. The latest version of a live
// file is its current content.
type Version struct {
	N      int64     `json:"version"`
	Path   string    `json:"path"`
	Op     string    `json:"op"` // create, write, truncate, chmod, delete, revert, restore, copy, import
	Time   time.Time `json:"time"`
	Kind   Kind      `json:"kind"`
	Mode   uint32    `json:"mode"`
	Size   int64     `json:"size"`
	Target string    `json:"target,omitempty"`
	ino    int64
	chunks []byte
}

// recordVersion appends in's state to its history, named dir/name.
func (t *txn) recordVersion(in *inode, dir int64, name, op string) error {
	path, err := t.childPath(dir, name)
	if err != nil {
		return err
	}
	return t.recordVersionAt(in, path, op)
}

// recordVersionAt appends in's state to its history unless the latest
// version already holds exactly that state. path "" means in's live path.
func (t *txn) recordVersionAt(in *inode, path, op string) error {
	if in.kind == KindDir {
		return nil
	}
	var n int64
	var last *Version
	var err error
	if in.fresh && in.lastVersion == 0 {
		// A file created in this transaction has no history yet.
	} else if in.lastVersion > 0 {
		n = in.lastVersion
	} else if lv, ok := t.newestVersion(in.ino); ok {
		if lv.N > 0 {
			last, n = &lv, lv.N
		}
	} else {
		row := t.tx.QueryRowContext(t.ctx, "SELECT n, op, kind, mode, size, target, chunks FROM versions WHERE ino = ? ORDER BY n DESC LIMIT 1", in.ino)
		var lv Version
		err = row.Scan(&lv.N, &lv.Op, &lv.Kind, &lv.Mode, &lv.Size, &lv.Target, &lv.chunks)
		switch {
		case err == nil:
			last, n = &lv, lv.N
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		t.noteVersion(in.ino, lv) // N 0: the file has no history
	}
	if last != nil && (last.Op == "delete") == (op == "delete") && last.Kind == in.kind && last.Mode == in.mode &&
		last.Size == in.size && last.Target == in.target && bytes.Equal(last.chunks, in.chunks) {
		return nil
	}
	if path == "" {
		if path, err = t.inoPath(in.ino); err != nil {
			return err
		}
	}
	_, err = t.tx.ExecContext(t.ctx, "INSERT INTO versions (ino, n, path, op, time_ns, kind, mode, size, target, chunks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		in.ino, n+1, path, op, t.now, in.kind, in.mode, in.size, in.target, in.chunks)
	if err != nil {
		return err
	}
	if in.fresh {
		in.lastVersion = n + 1
	}
	t.noteVersion(in.ino, Version{N: n + 1, Op: op, Kind: in.kind, Mode: in.mode, Size: in.size, Target: in.target, chunks: bytes.Clone(in.chunks)})
	return nil
}

// historyIno finds the inode whose history PATH names: the live file at
// path, else the file last deleted at that path.
func (v *Vault) historyIno(ctx context.Context, q querier, path string) (int64, error) {
	if ino, err := v.resolve(ctx, q, path, false); err == nil {
		return ino, nil
	} else if !wire.HasCode(err, wire.CodeNotFound) {
		return 0, err
	}
	var ino int64
	err := q.QueryRowContext(ctx, "SELECT ino FROM versions WHERE path = ? AND op = 'delete' ORDER BY time_ns DESC, n DESC LIMIT 1", path).Scan(&ino)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, wire.Errorf(wire.CodeNotFound, "%s: no such file and no history", path).With("path", path)
	}
	return ino, err
}

// Log returns the versions of the file at path, oldest first.
func (v *Vault) Log(ctx context.Context, path string) ([]Version, error) {
	path, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	var out []Version
	err = v.view(ctx, "log "+path, func(q querier, _ state) error {
		ino, err := v.historyIno(ctx, q, path)
		if err != nil {
			return err
		}
		out, err = versionsOf(ctx, q, ino)
		return err
	})
	return out, err
}

func versionsOf(ctx context.Context, q querier, ino int64) ([]Version, error) {
	rows, err := q.QueryContext(ctx, "SELECT n, path, op, time_ns, kind, mode, size, target, chunks FROM versions WHERE ino = ? ORDER BY n", ino)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Version{}
	for rows.Next() {
		var ver Version
		var ns int64
		if err := rows.Scan(&ver.N, &ver.Path, &ver.Op, &ns, &ver.Kind, &ver.Mode, &ver.Size, &ver.Target, &ver.chunks); err != nil {
			return nil, err
		}
		ver.Time, ver.ino = time.Unix(0, ns), ino
		out = append(out, ver)
	}
	return out, rows.Err()
}

func pickVersion(vs []Version, n int64, path string) (Version, error) {
	for _, ver := range vs {
		if ver.N == n {
			return ver, nil
		}
	}
	return Version{}, wire.Errorf(wire.CodeVersionNotFound, "%s has no version %d", path, n).With("path", path).With("version", n)
}

// ReadVersion writes version n of the file at path to w, streaming as
// ReadFile does; it fails as OpenVersion does before writing anything.
func (v *Vault) ReadVersion(ctx context.Context, path string, n int64, w io.Writer) (int64, error) {
	r, err := v.OpenVersion(ctx, path, n)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return r.WriteTo(w)
}

// Revert makes version to (0: the one before the latest) the file's current
// state, as a new version. A deleted file is brought back at its last path.
func (v *Vault) Revert(ctx context.Context, path string, to int64) (Version, error) {
	path, err := CleanPath(path)
	if err != nil {
		return Version{}, err
	}
	var result Version
	err = v.update(ctx, "revert "+path, func(t *txn) error {
		ino, err := v.historyIno(ctx, t.tx, path)
		if err != nil {
			return err
		}
		vs, err := versionsOf(ctx, t.tx, ino)
		if err != nil {
			return err
		}
		if len(vs) == 0 {
			return wire.Errorf(wire.CodeVersionNotFound, "%s has no history", path)
		}
		if to == 0 {
			// The version before the latest that has content.
			for i := len(vs) - 2; i >= 0; i-- {
				if vs[i].Op != "delete" {
					to = vs[i].N
					break
				}
			}
			if to == 0 {
				return wire.Errorf(wire.CodeVersionNotFound, "%s has no earlier version to revert to", path)
			}
		}
		ver, err := pickVersion(vs, to, path)
		if err != nil {
			return err
		}
		if ver.Op == "delete" {
			return wire.Errorf(wire.CodeVersionNotFound, "version %d of %s records its deletion; pick a version with content", to, path)
		}
		in, err := getInode(ctx, t.tx, ino)
		if wire.HasCode(err, wire.CodeNotFound) {
			// Deleted: bring it back under the path of the latest version.
			target := vs[len(vs)-1].Path
			dir, name, derr := v.resolveParent(ctx, t.tx, target)
			if derr != nil {
				return derr
			}
			dirIn, derr := t.dirInode(dir)
			if derr != nil {
				return derr
			}
			if _, _, ok, _ := lookupDentry(ctx, t.tx, dir, name); ok {
				return wire.Errorf(wire.CodeAlreadyExists, "%s exists; move it away to bring the old file back", target)
			}
			in = &inode{ino: ino, kind: ver.Kind, mode: ver.Mode, uid: uint32(uidNow()), gid: uint32(gidNow()), nlink: 1, mtime: t.now, ctime: t.now, atime: t.now, chunks: []byte{}, xattrs: []byte{}}
			in.size, in.chunks, in.target = ver.Size, ver.chunks, ver.Target
			if err := t.checkGrowth(in, in.size); err != nil {
				return err
			}
			if err := t.saveInode(in); err != nil {
				return err
			}
			if err := t.setDentry(dir, name, ino); err != nil {
				return err
			}
			if err := t.touchDir(dirIn); err != nil {
				return err
			}
			path = target
		} else if err != nil {
			return err
		} else {
			if in.kind != ver.Kind {
				return wire.Errorf(wire.CodeInvalidInput, "%s is now a %s; version %d is a %s", path, in.kind, to, ver.Kind)
			}
			if err := t.checkGrowth(in, ver.Size); err != nil {
				return err
			}
			in.mode, in.size, in.chunks, in.target = ver.Mode, ver.Size, ver.chunks, ver.Target
			in.mtime, in.ctime = t.now, t.now
			if err := t.saveInode(in); err != nil {
				return err
			}
		}
		if err := t.recordVersionAt(in, path, "revert"); err != nil {
			return err
		}
		t.audit("revert", path, map[string]any{"to_version": to})
		all, err := versionsOf(ctx, t.tx, ino)
		if err != nil {
			return err
		}
		result = all[len(all)-1]
		return nil
	})
	return result, err
}

// PruneResult says what Prune removed.
type PruneResult struct {
	Versions int64 `json:"versions_removed"`
}

// Prune keeps the newest keep versions of every file (at least 1) and
// removes the rest. Chunks they alone used are freed by GC.
func (v *Vault) Prune(ctx context.Context, keep int64) (PruneResult, error) {
	if keep < 1 {
		return PruneResult{}, wire.Errorf(wire.CodeInvalidInput, "prune: --keep must be at least 1")
	}
	var res PruneResult
	err := v.update(ctx, "prune history", func(t *txn) error {
		r, err := t.tx.ExecContext(ctx, `DELETE FROM versions WHERE (ino, n) IN (
			SELECT ino, n FROM (SELECT ino, n, ROW_NUMBER() OVER (PARTITION BY ino ORDER BY n DESC) AS rn FROM versions) WHERE rn > ?)`, keep)
		if err != nil {
			return err
		}
		res.Versions, _ = r.RowsAffected()
		t.audit("prune", "/", map[string]any{"keep": keep, "versions_removed": res.Versions})
		return nil
	})
	return res, err
}
