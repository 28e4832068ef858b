package vault

import (
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"avfs/wire"
)

// SyncResult counts what Sync changed.
type SyncResult struct {
	Added    int64 `json:"added"`
	Modified int64 `json:"modified"`
	Deleted  int64 `json:"deleted"`
}

// Sync makes the vault's tree identical to the host tree at dir, in one
// transaction: entries missing from the host are removed, new ones are
// added, and changed ones are updated. A host file counts as changed when
// its kind, mode, size, mtime or symlink target differ from the vault, or
// its ctime is after since (the moment the tree was exported), so content
// rewritten in place is caught without reading unchanged files. Special
// files are skipped; hard links on the host become separate files.
func (v *Vault) Sync(ctx context.Context, dir string, since time.Time) (SyncResult, error) {
	var res SyncResult
	err := v.update(ctx, "sync from "+dir, func(t *txn) error {
		root, err := getInode(ctx, t.tx, rootIno)
		if err != nil {
			return err
		}
		if err := v.syncDir(t, dir, root, "/", since, &res); err != nil {
			return err
		}
		t.audit("sync", "/", map[string]any{"host_path": dir, "added": res.Added, "modified": res.Modified, "deleted": res.Deleted})
		return nil
	})
	return res, err
}

func hostMode(fi fs.FileInfo) uint32 {
	m := uint32(fi.Mode().Perm())
	if fi.Mode()&fs.ModeSetuid != 0 {
		m |= 0o4000
	}
	if fi.Mode()&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}

func ctimeOf(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return time.Now()
}

// syncDir makes directory dir (inode in, at vault path vp) match the host directory hp.
func (v *Vault) syncDir(t *txn, hp string, dir *inode, vp string, since time.Time, res *SyncResult) error {
	ents, err := os.ReadDir(hp)
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, err)
	}
	host := map[string]bool{}
	for _, e := range ents {
		host[e.Name()] = true
	}
	// Removed on the host.
	names, err := childNames(t.ctx, t.tx, dir.ino)
	if err != nil {
		return err
	}
	for _, name := range names {
		if host[name] {
			continue
		}
		n, err := t.removeTree(dir, name, true)
		if err != nil {
			return err
		}
		res.Deleted += n
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		child := filepath.Join(hp, name)
		cvp := path.Join(vp, name)
		fi, err := os.Lstat(child)
		if err != nil {
			return wire.Errorf(wire.CodeHostIO, "read %s: %w", child, err)
		}
		var kind Kind
		switch {
		case fi.IsDir():
			kind = KindDir
		case fi.Mode()&fs.ModeSymlink != 0:
			kind = KindSymlink
		case fi.Mode().IsRegular():
			kind = KindFile
		default:
			continue
		}
		mode := hostMode(fi)
		mtime := fi.ModTime().UnixNano()
		target := ""
		if kind == KindSymlink {
			if target, err = os.Readlink(child); err != nil {
				return wire.Errorf(wire.CodeHostIO, "read %s: %w", child, err)
			}
			mode = 0o777
		}
		var in *inode
		ino, _, ok, err := lookupDentry(t.ctx, t.tx, dir.ino, name)
		if err != nil {
			return err
		}
		if ok {
			if in, err = getInode(t.ctx, t.tx, ino); err != nil {
				return err
			}
			if in.kind != kind || (kind == KindSymlink && in.target != target) {
				// Replaced by another kind of entry (or another link target).
				n, err := t.removeTree(dir, name, true)
				if err != nil {
					return err
				}
				res.Deleted += n
				in = nil
			}
		}
		created := false
		if in == nil {
			if in, err = t.create(dir, name, kind, mode, uint32(uidNow()), uint32(gidNow()), target); err != nil {
				return err
			}
			created = true
			res.Added++
		}
		switch kind {
		case KindDir:
			if in.mode != mode {
				in.mode, in.ctime = mode, t.now
				if err := t.saveInode(in); err != nil {
					return err
				}
				if !created {
					res.Modified++
				}
			}
			if err := v.syncDir(t, child, in, cvp, since, res); err != nil {
				return err
			}
			// Entries changed inside: restore the host's directory mtime last.
			if in.mtime != mtime {
				in.mtime = mtime
				if err := t.saveInode(in); err != nil {
					return err
				}
			}
		case KindSymlink:
			if in.mtime != mtime {
				in.mtime = mtime
				if err := t.saveInode(in); err != nil {
					return err
				}
			}
		case KindFile:
			changed := created || in.size != fi.Size() || in.mtime != mtime || in.mode != mode || ctimeOf(fi).After(since)
			if !changed {
				continue
			}
			f, err := os.Open(child)
			if err != nil {
				return wire.Errorf(wire.CodeHostIO, "read %s: %w", child, err)
			}
			before := append([]byte(nil), in.chunks...)
			oldMode, oldSize := in.mode, in.size
			err = t.writeAll(in, f)
			f.Close()
			if err != nil {
				return err
			}
			in.mode, in.mtime = mode, mtime
			if err := t.saveInode(in); err != nil {
				return err
			}
			if created || string(before) != string(in.chunks) || oldMode != mode || oldSize != in.size {
				if err := t.recordVersionAt(in, cvp, "write"); err != nil {
					return err
				}
				if !created {
					res.Modified++
				}
			}
		}
	}
	return nil
}
