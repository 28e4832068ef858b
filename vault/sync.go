package vault

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

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
// rewritten in place is caught without reading unchanged files. Named
// pipes and socket nodes are synced (their mode only, once made); devices
// are skipped. Host hard links within dir are vault hard links (as
// Export makes them): a link made on the host is made in the vault, one
// broken on the host (the file replaced) is broken in the vault.
//
// Export drops the setuid and setgid bits of files: a host file whose
// mode is its vault file's less those bits, and whose ctime is not after
// since, keeps them in the vault. One changed since (written, chmodded)
// gets the host's mode, as a write by an unprivileged process clears
// them on a host file.
//
// dir is opened as given; nothing beneath it is followed: symlinks are
// read as symlinks, and an entry that is not, when opened, what it was
// when listed (replaced meanwhile, by a symlink say) fails the sync with
// host_io rather than be read.
func (v *Vault) Sync(ctx context.Context, dir string, since time.Time) (SyncResult, error) {
	var res SyncResult
	err := v.update(ctx, "sync from "+dir, func(t *txn) error {
		root, err := getInode(ctx, t.tx, rootIno)
		if err != nil {
			return err
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return wire.Errorf(wire.CodeHostIO, "read %s: %w", dir, err)
		}
		defer unix.Close(fd)
		if err := v.syncDir(t, dir, fd, root, "/", since, map[devIno]int64{}, &res); err != nil {
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
	if _, _, _, ctime, ok := statTimes(fi); ok {
		return ctime
	}
	return time.Now()
}

// syncedMode is the mode a vault file of mode vaultMode takes from a host
// copy of mode hostMode: the vault's when the host's differs only by the
// setuid/setgid bits Export dropped and the host file was not changed
// since the export.
func syncedMode(hostMode, vaultMode uint32, fi fs.FileInfo, since time.Time) uint32 {
	if vaultMode&0o6000 != 0 && hostMode == vaultMode&^0o6000 && !ctimeOf(fi).After(since) {
		return vaultMode
	}
	return hostMode
}

// openRead opens the entry name in dirfd, listed as fi, for reading
// without following it, and checks it is still that entry.
func openRead(dirfd int, name, hp string, fi hostInfo, dir bool) (int, error) {
	if beforeHostOpen != nil {
		beforeHostOpen(hp)
	}
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	if dir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err != nil {
		return -1, wire.Errorf(wire.CodeHostIO, "read %s: %w (changed while read?)", hp, err).With("host_path", hp)
	}
	now, err := fstatInfo(fd, name)
	if err == nil && !sameEntry(fi, now) {
		err = errors.New("replaced while read")
	}
	if err != nil {
		unix.Close(fd)
		return -1, wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, err).With("host_path", hp)
	}
	return fd, nil
}

// beforeHostOpen, when set (by tests), is called with a host path just
// before Import or Sync opens it.
var beforeHostOpen func(hp string)

// hostKind is the vault kind of a host file; false for a device.
func hostKind(fi fs.FileInfo) (Kind, bool) {
	switch m := fi.Mode(); {
	case m.IsDir():
		return KindDir, true
	case m&fs.ModeSymlink != 0:
		return KindSymlink, true
	case m.IsRegular():
		return KindFile, true
	case m&fs.ModeNamedPipe != 0:
		return KindFifo, true
	case m&fs.ModeSocket != 0:
		return KindSocket, true
	}
	return 0, false
}

// devIno names a host file.
type devIno struct{ dev, ino uint64 }

// syncDir makes directory dir (inode in, at vault path vp) match the host
// directory hp. links maps the host files with several names seen so far to
// the vault inode they became, so that host hard links stay vault hard links.
func (v *Vault) syncDir(t *txn, hp string, dirfd int, dir *inode, vp string, since time.Time, links map[devIno]int64, res *SyncResult) error {
	ents, err := readNames(dirfd)
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, err)
	}
	host := map[string]bool{}
	for _, name := range ents {
		host[name] = true
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
	for _, name := range ents {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		child := filepath.Join(hp, name)
		cvp := path.Join(vp, name)
		fi, err := lstatAt(dirfd, name)
		if err != nil {
			return wire.Errorf(wire.CodeHostIO, "read %s: %w", child, err)
		}
		kind, ok := hostKind(fi)
		if !ok {
			continue // devices have no place in a vault
		}
		mode := hostMode(fi)
		mtime := fi.ModTime().UnixNano()
		target := ""
		if kind == KindSymlink {
			if target, err = readlinkAt(dirfd, name); err != nil {
				return wire.Errorf(wire.CodeHostIO, "read %s: %w", child, err)
			}
			mode = 0o777
		}
		var in *inode
		ino, _, ok, err := lookupDentry(t.ctx, t.tx, dir.ino, name)
		if err != nil {
			return err
		}
		// A regular file with several names on the host: the first name
		// seen is synced as usual, the others become vault hard links of it.
		var key devIno
		hostNlink := uint64(1)
		if kind == KindFile {
			key, hostNlink = devIno{fi.st.Dev, fi.st.Ino}, uint64(fi.st.Nlink)
		}
		if target, seen := links[key]; seen && hostNlink > 1 {
			if ok && ino == target {
				continue // already that inode
			}
			if ok {
				n, err := t.removeTree(dir, name, true)
				if err != nil {
					return err
				}
				res.Deleted += n
			}
			tin, err := getInode(t.ctx, t.tx, target)
			if err != nil {
				return err
			}
			if err := t.link(tin, dir, name); err != nil {
				return err
			}
			res.Added++
			continue
		}
		if ok {
			if in, err = getInode(t.ctx, t.tx, ino); err != nil {
				return err
			}
			if kind == KindFile && in.kind == KindFile {
				mode = syncedMode(mode, in.mode, fi, since)
			}
			if kind == KindFile && in.kind == KindFile && in.nlink > 1 && hostNlink == 1 {
				// The host broke the link (the file was replaced, say by
				// sed -i): this name gets an inode of its own.
				if _, err := t.unlinkEntry(dir, name, KindFile); err != nil {
					return err
				}
				if in, err = t.create(dir, name, kind, mode, uint32(uidNow()), uint32(gidNow()), target); err != nil {
					return err
				}
				res.Modified++
				if err := v.syncFile(t, dirfd, name, child, in, cvp, fi, mode, mtime, true, res); err != nil {
					return err
				}
				continue
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
			fd, err := openRead(dirfd, name, child, fi, true)
			if err != nil {
				return err
			}
			err = v.syncDir(t, child, fd, in, cvp, since, links, res)
			unix.Close(fd)
			if err != nil {
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
		case KindFifo, KindSocket:
			// Data through a pipe moves its host mtime; in a mount it
			// moves nothing. Only the mode is synced.
			if created || in.mode == mode {
				continue
			}
			in.mode, in.ctime = mode, t.now
			if err := t.saveInode(in); err != nil {
				return err
			}
			res.Modified++
			if err := t.recordVersionAt(in, cvp, "chmod"); err != nil {
				return err
			}
		case KindFile:
			if hostNlink > 1 {
				links[key] = in.ino
			}
			changed := created || in.size != fi.Size() || in.mtime != mtime || in.mode != mode || ctimeOf(fi).After(since)
			if !changed {
				continue
			}
			if err := v.syncFile(t, dirfd, name, child, in, cvp, fi, mode, mtime, created, res); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncFile copies the host file name in dirfd (child, listed as fi) into
// inode in (at vault path cvp). created says whether the vault entry is
// new (counted as added already).
func (v *Vault) syncFile(t *txn, dirfd int, name, child string, in *inode, cvp string, fi hostInfo, mode uint32, mtime int64, created bool, res *SyncResult) error {
	fd, err := openRead(dirfd, name, child, fi, false)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), child)
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
	return nil
}

// Unsynced counts the entries of the host tree at dir (a copy of the whole
// vault made by Export at since) that Sync would add, delete or change in
// the vault, by the same tests. It changes nothing: it tells what a
// read-only run wrote to its copy and lost.
func (v *Vault) Unsynced(ctx context.Context, dir string, since time.Time) (int, error) {
	n := 0
	err := v.view(ctx, "compare "+dir, func(q querier, _ state) error {
		root, err := getInode(ctx, q, rootIno)
		if err != nil {
			return err
		}
		inVault := map[string]Entry{}
		if err := walkTree(ctx, q, entryOf("/", root), func(e Entry) error {
			inVault[e.Path] = e
			return nil
		}); err != nil {
			return err
		}
		seen := 0
		err = filepath.WalkDir(dir, func(hp string, _ fs.DirEntry, werr error) error {
			if werr != nil {
				return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, werr)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			fi, err := os.Lstat(hp)
			if err != nil {
				return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, err)
			}
			kind, ok := hostKind(fi)
			if !ok {
				return nil // Sync skips devices
			}
			rel, _ := filepath.Rel(dir, hp)
			e, ok := inVault[path.Join("/", filepath.ToSlash(rel))]
			if !ok {
				n++ // added
				return nil
			}
			seen++
			mode := hostMode(fi)
			if kind == KindFile && e.Kind == KindFile {
				mode = syncedMode(mode, uint32(e.Mode), fi, since)
			}
			changed := e.Kind != kind || kind != KindSymlink && uint32(e.Mode) != mode
			switch {
			case changed:
			case kind == KindFile:
				changed = e.Size != fi.Size() || e.Mtime.UnixNano() != fi.ModTime().UnixNano() || ctimeOf(fi).After(since)
			case kind == KindSymlink:
				target, err := os.Readlink(hp)
				if err != nil {
					return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, err)
				}
				changed = target != e.Target
			}
			if changed {
				n++
			}
			return nil
		})
		n += len(inVault) - seen // deleted
		return err
	})
	return n, err
}
