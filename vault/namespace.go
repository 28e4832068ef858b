package vault

import (
	"database/sql"
	"errors"

	"avfs/wire"
)

// dirInode loads ino and checks that it is a directory.
func (t *txn) dirInode(ino int64) (*inode, error) {
	in, err := getInode(t.ctx, t.tx, ino)
	if err != nil {
		return nil, err
	}
	if in.kind != KindDir {
		return nil, wire.Errorf(wire.CodeNotDir, "not a directory")
	}
	return in, nil
}

// touchDir records a change of dir's entries.
func (t *txn) touchDir(dir *inode) error {
	dir.mtime, dir.ctime = t.now, t.now
	return t.saveInode(dir)
}

// create makes a new inode named name in dir.
func (t *txn) create(dir *inode, name string, kind Kind, mode, uid, gid uint32, target string) (*inode, error) {
	return t.createSpec(dir, name, NodeSpec{Kind: kind, Mode: mode, UID: uid, GID: gid, Target: target}, false)
}

// createSpec is create for a NodeSpec, which may carry a reserved inode
// number and a creation time. With content set, the caller writes the new
// file's content, then saves the inode and records its first version.
func (t *txn) createSpec(dir *inode, name string, spec NodeSpec, content bool) (*inode, error) {
	kind := spec.Kind
	if err := validName(name); err != nil {
		return nil, err
	}
	if _, _, ok, err := lookupDentry(t.ctx, t.tx, dir.ino, name); err != nil {
		return nil, err
	} else if ok {
		return nil, wire.Errorf(wire.CodeAlreadyExists, "%q already exists", name)
	}
	var in *inode
	if spec.Ino != 0 {
		ino := int64(spec.Ino)
		// Reserved by this process (ReserveIno), so no node has it unless
		// another process created nodes since, which a writer mount's lock
		// forbids: check rather than trust.
		if _, err := getInode(t.ctx, t.tx, ino); err == nil {
			return nil, wire.Errorf(wire.CodeInternal, "reserved inode %d is already in use", ino)
		} else if !wire.HasCode(err, wire.CodeNotFound) {
			return nil, err
		}
		in = t.newInodeAt(ino, kind, spec.Mode, spec.UID, spec.GID, spec.Target)
	} else {
		in = t.newInode(kind, spec.Mode, spec.UID, spec.GID, spec.Target)
	}
	if !spec.Time.IsZero() {
		ns := spec.Time.UnixNano()
		in.mtime, in.ctime, in.atime = ns, ns, ns
	}
	if !content {
		if err := t.saveInode(in); err != nil {
			return nil, err
		}
	}
	if err := t.insertDentry(dir.ino, name, in.ino); err != nil {
		return nil, err
	}
	if kind == KindDir {
		dir.nlink++
	}
	if err := t.touchDir(dir); err != nil {
		return nil, err
	}
	if kind != KindDir && !content {
		if err := t.recordVersion(in, dir.ino, name, "create"); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// link adds another name for a non-directory inode.
func (t *txn) link(in *inode, dir *inode, name string) error {
	if in.kind == KindDir {
		return wire.Errorf(wire.CodeIsDir, "cannot hard-link a directory")
	}
	if err := validName(name); err != nil {
		return err
	}
	if _, _, ok, err := lookupDentry(t.ctx, t.tx, dir.ino, name); err != nil {
		return err
	} else if ok {
		return wire.Errorf(wire.CodeAlreadyExists, "%q already exists", name)
	}
	if err := t.insertDentry(dir.ino, name, in.ino); err != nil {
		return err
	}
	in.nlink++
	in.ctime = t.now
	if err := t.saveInode(in); err != nil {
		return err
	}
	return t.touchDir(dir)
}

// isEmptyDir reports whether a directory has no entries.
func (t *txn) isEmptyDir(ino int64) (bool, error) {
	var n int
	err := t.tx.QueryRowContext(t.ctx, "SELECT COUNT(*) FROM (SELECT 1 FROM dentries WHERE parent = ? AND gen_to = "+liveSQL+" LIMIT 1)", ino).Scan(&n)
	return n == 0, err
}

// unlinkEntry removes dir/name. want is KindDir for rmdir, KindFile for
// unlink of a non-directory, 0 for either.
func (t *txn) unlinkEntry(dir *inode, name string, want Kind) (*inode, error) {
	ino, entryGen, ok, err := lookupDentry(t.ctx, t.tx, dir.ino, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, wire.Errorf(wire.CodeNotFound, "%q does not exist", name)
	}
	in, err := getInode(t.ctx, t.tx, ino)
	if err != nil {
		return nil, err
	}
	switch {
	case want == KindDir && in.kind != KindDir:
		return nil, wire.Errorf(wire.CodeNotDir, "%q is not a directory", name)
	case want == KindFile && in.kind == KindDir:
		return nil, wire.Errorf(wire.CodeIsDir, "%q is a directory", name)
	}
	if in.kind == KindDir {
		empty, err := t.isEmptyDir(in.ino)
		if err != nil {
			return nil, err
		}
		if !empty {
			return nil, wire.Errorf(wire.CodeNotEmpty, "directory %q is not empty", name)
		}
		t.pathsChanged()
	}
	// History names the file by the path it had.
	var path string
	if in.kind != KindDir && in.nlink <= 1 {
		if path, err = t.childPath(dir.ino, name); err != nil {
			return nil, err
		}
	}
	if err := t.dropDentryAt(dir.ino, name, entryGen); err != nil {
		return nil, err
	}
	delete(t.paths, in.ino)
	if err := t.release(in, path); err != nil {
		return nil, err
	}
	if in.kind == KindDir {
		dir.nlink--
	}
	return in, t.touchDir(dir)
}

// release drops one link of in, deleting it with the last one.
func (t *txn) release(in *inode, path string) error {
	if in.kind == KindDir || in.nlink <= 1 {
		if in.kind != KindDir {
			if err := t.recordVersionAt(in, path, "delete"); err != nil {
				return err
			}
		}
		return t.dropInode(in)
	}
	in.nlink--
	in.ctime = t.now
	return t.saveInode(in)
}

// inoPath is a live path of ino, remembered for the rest of the
// transaction (until a rename or removal changes paths). Directory paths
// are also remembered across transactions while dir_epoch is unchanged.
func (t *txn) inoPath(ino int64) (string, error) {
	if p, ok := t.paths[ino]; ok {
		return p, nil
	}
	if ino == rootIno {
		return "/", nil
	}
	if p, ok := t.v.cachedDir(t.st.dirEpoch, ino); ok && t.st.dirEpoch == t.orig.dirEpoch {
		return p, nil
	}
	var parent int64
	var name string
	err := t.tx.QueryRowContext(t.ctx, "SELECT parent, name FROM dentries WHERE ino = ? AND gen_to = "+liveSQL+" ORDER BY parent, name LIMIT 1", ino).Scan(&parent, &name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", wire.Errorf(wire.CodeNotFound, "inode %d has no path", ino)
	}
	if err != nil {
		return "", err
	}
	if len(t.paths) > 100000 {
		t.paths = nil
	}
	pp, err := t.inoPath(parent)
	if err != nil {
		return "", err
	}
	if t.dirPaths == nil {
		t.dirPaths = map[int64]string{}
	}
	t.dirPaths[parent] = pp
	p := pp + "/" + name
	if pp == "/" {
		p = "/" + name
	}
	if t.paths == nil {
		t.paths = map[int64]string{}
	}
	t.paths[ino] = p
	return p, nil
}

// pathsChanged forgets every path: a rename or removal may have changed them.
func (t *txn) pathsChanged() {
	t.paths, t.dirPaths = nil, nil
	t.st.dirEpoch++
}

// cachedDir returns a remembered directory path valid at epoch.
func (v *Vault) cachedDir(epoch, ino int64) (string, bool) {
	v.dirsMu.Lock()
	defer v.dirsMu.Unlock()
	if v.dirsEpoch != epoch {
		return "", false
	}
	p, ok := v.dirs[ino]
	return p, ok
}

// rememberDirs keeps the directory paths a committed transaction learned.
func (v *Vault) rememberDirs(epoch int64, paths map[int64]string) {
	if len(paths) == 0 {
		return
	}
	v.dirsMu.Lock()
	defer v.dirsMu.Unlock()
	if v.dirsEpoch != epoch || v.dirs == nil || len(v.dirs) > 50000 {
		v.dirs, v.dirsEpoch = map[int64]string{}, epoch
	}
	for ino, p := range paths {
		v.dirs[ino] = p
	}
}

// childPath is the path of dir/name.
func (t *txn) childPath(dir int64, name string) (string, error) {
	p, err := t.inoPath(dir)
	if err != nil {
		return "", err
	}
	if dir != rootIno {
		// dir is a directory: remember its path beyond this transaction.
		if t.dirPaths == nil {
			t.dirPaths = map[int64]string{}
		}
		t.dirPaths[dir] = p
	}
	if p == "/" {
		return "/" + name, nil
	}
	return p + "/" + name, nil
}

// RenameFlags select rename(2) variants.
type RenameFlags uint32

// Rename flags, as in renameat2(2).
const (
	RenameNoReplace RenameFlags = 1 << 0
	RenameExchange  RenameFlags = 1 << 1
)

// rename moves odir/oname to ndir/nname with POSIX semantics.
func (t *txn) rename(odir *inode, oname string, ndir *inode, nname string, flags RenameFlags) error {
	t.pathsChanged()
	if err := validName(nname); err != nil {
		return err
	}
	sino, _, ok, err := lookupDentry(t.ctx, t.tx, odir.ino, oname)
	if err != nil {
		return err
	}
	if !ok {
		return wire.Errorf(wire.CodeNotFound, "%q does not exist", oname)
	}
	src, err := getInode(t.ctx, t.tx, sino)
	if err != nil {
		return err
	}
	if src.kind == KindDir {
		// A directory cannot move into itself or below itself.
		for p := ndir.ino; ; {
			if p == src.ino {
				return wire.Errorf(wire.CodeInvalidInput, "cannot move a directory into itself")
			}
			if p == rootIno {
				break
			}
			var parent int64
			if err := t.tx.QueryRowContext(t.ctx, "SELECT parent FROM dentries WHERE ino = ? AND gen_to = "+liveSQL+" LIMIT 1", p).Scan(&parent); err != nil {
				return err
			}
			p = parent
		}
	}
	dino, _, exists, err := lookupDentry(t.ctx, t.tx, ndir.ino, nname)
	if err != nil {
		return err
	}
	if exists && flags&RenameNoReplace != 0 {
		return wire.Errorf(wire.CodeAlreadyExists, "%q already exists", nname)
	}
	if exists && dino == sino {
		return nil // same file: rename(2) does nothing
	}
	sameDir := odir.ino == ndir.ino
	if flags&RenameExchange != 0 {
		if !exists {
			return wire.Errorf(wire.CodeNotFound, "%q does not exist", nname)
		}
		dst, err := getInode(t.ctx, t.tx, dino)
		if err != nil {
			return err
		}
		if err := t.setDentry(odir.ino, oname, dino); err != nil {
			return err
		}
		if err := t.setDentry(ndir.ino, nname, sino); err != nil {
			return err
		}
		if !sameDir && (src.kind == KindDir) != (dst.kind == KindDir) {
			if src.kind == KindDir {
				odir.nlink--
				ndir.nlink++
			} else {
				odir.nlink++
				ndir.nlink--
			}
		}
		return t.touchDirs(odir, ndir)
	}
	if exists {
		if flags&RenameNoReplace != 0 {
			return wire.Errorf(wire.CodeAlreadyExists, "%q already exists", nname)
		}
		dst, err := getInode(t.ctx, t.tx, dino)
		if err != nil {
			return err
		}
		switch {
		case src.kind == KindDir && dst.kind != KindDir:
			return wire.Errorf(wire.CodeNotDir, "cannot replace non-directory %q with a directory", nname)
		case src.kind != KindDir && dst.kind == KindDir:
			return wire.Errorf(wire.CodeIsDir, "cannot replace directory %q with a non-directory", nname)
		}
		if dst.kind == KindDir {
			empty, err := t.isEmptyDir(dst.ino)
			if err != nil {
				return err
			}
			if !empty {
				return wire.Errorf(wire.CodeNotEmpty, "directory %q is not empty", nname)
			}
			ndir.nlink--
		}
		var path string
		if dst.kind != KindDir && dst.nlink <= 1 {
			if path, err = t.childPath(ndir.ino, nname); err != nil {
				return err
			}
		}
		if err := t.release(dst, path); err != nil {
			return err
		}
	}
	if err := t.dropDentry(odir.ino, oname); err != nil {
		return err
	}
	if err := t.setDentry(ndir.ino, nname, sino); err != nil {
		return err
	}
	if src.kind == KindDir && !sameDir {
		odir.nlink--
		ndir.nlink++
	}
	src.ctime = t.now
	if err := t.saveInode(src); err != nil {
		return err
	}
	return t.touchDirs(odir, ndir)
}

// touchDirs touches one or two directories. Callers pass the same *inode
// twice when both are one directory.
func (t *txn) touchDirs(a, b *inode) error {
	if a == b {
		return t.touchDir(a)
	}
	if err := t.touchDir(a); err != nil {
		return err
	}
	return t.touchDir(b)
}
