package vault

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

// TransferResult counts what Import or Export moved.
type TransferResult struct {
	Files    int64 `json:"files"`
	Dirs     int64 `json:"dirs"`
	Symlinks int64 `json:"symlinks"`
	Special  int64 `json:"special"` // named pipes and Unix socket nodes
	Bytes    int64 `json:"bytes"`
}

// Import copies the host file or tree at hostPath to vaultPath in one
// transaction, keeping modes, symlinks (as links, never followed), mtimes
// and hard links (among the names imported). Existing vault files are
// replaced; directories are merged.
// Named pipes and Unix socket nodes are kept as such; devices are skipped.
func (v *Vault) Import(ctx context.Context, hostPath, vaultPath string) (TransferResult, error) {
	var res TransferResult
	vaultPath, err := CleanPath(vaultPath)
	if err != nil {
		return res, err
	}
	root, err := filepath.Abs(hostPath)
	if err != nil {
		return res, wire.Errorf(wire.CodeHostIO, "import %s: %w", hostPath, err)
	}
	if _, err := os.Lstat(root); err != nil {
		return res, wire.Errorf(wire.CodeHostIO, "import %s: %w", hostPath, err).With("host_path", hostPath)
	}
	err = v.update(ctx, "import "+hostPath, func(t *txn) error {
		linked := map[devIno]int64{} // host files with several names -> the vault inode made for the first
		err := filepath.WalkDir(root, func(hp string, d fs.DirEntry, werr error) error {
			if werr != nil {
				return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, werr)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, hp)
			vp := path.Join(vaultPath, filepath.ToSlash(rel))
			fi, err := os.Lstat(hp)
			if err != nil {
				return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, err)
			}
			mode := hostMode(fi)
			var in *inode
			switch {
			case fi.IsDir():
				if in, err = v.mkdirAll(t, vp, mode); err != nil {
					return err
				}
				in.mode = mode
				res.Dirs++
			case fi.Mode()&fs.ModeSymlink != 0:
				target, err := os.Readlink(hp)
				if err != nil {
					return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, err)
				}
				if in, err = v.replaceNode(t, vp, KindSymlink, 0o777, target); err != nil {
					return err
				}
				res.Symlinks++
			case fi.Mode().IsRegular():
				st, _ := fi.Sys().(*syscall.Stat_t)
				var key devIno
				if st != nil && st.Nlink > 1 {
					key = devIno{uint64(st.Dev), st.Ino}
					if target, seen := linked[key]; seen {
						// Another name of a file imported already: a hard link.
						res.Files++
						return v.linkAt(t, vp, target)
					}
				}
				if in, err = v.replaceNode(t, vp, KindFile, mode, ""); err != nil {
					return err
				}
				f, err := os.Open(hp)
				if err != nil {
					return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, err)
				}
				err = t.writeAll(in, f)
				f.Close()
				if err != nil {
					return err
				}
				if key != (devIno{}) {
					linked[key] = in.ino
				}
				res.Files++
				res.Bytes += in.size
			case fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0:
				kind, _ := hostKind(fi)
				if in, err = v.replaceNode(t, vp, kind, mode, ""); err != nil {
					return err
				}
				res.Special++
			default:
				return nil // devices have no place in a vault
			}
			in.mtime = fi.ModTime().UnixNano()
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				in.atime = time.Unix(st.Atim.Sec, st.Atim.Nsec).UnixNano()
			}
			if err := t.saveInode(in); err != nil {
				return err
			}
			return t.recordVersionAt(in, vp, "import")
		})
		if err != nil {
			return err
		}
		t.audit("import", vaultPath, map[string]any{"host_path": root, "files": res.Files, "dirs": res.Dirs, "symlinks": res.Symlinks, "bytes": res.Bytes})
		return nil
	})
	return res, err
}

// linkAt makes vault path p another name of inode ino, replacing a
// non-directory entry there.
func (v *Vault) linkAt(t *txn, p string, ino int64) error {
	dirIno, name, err := v.resolveParent(t.ctx, t.tx, p)
	if err != nil {
		return err
	}
	dir, err := t.dirInode(dirIno)
	if err != nil {
		return err
	}
	if old, _, ok, err := lookupDentry(t.ctx, t.tx, dir.ino, name); err != nil {
		return err
	} else if ok && old == ino {
		return nil
	} else if ok {
		if _, err := t.unlinkEntry(dir, name, KindFile); err != nil {
			return err
		}
	}
	in, err := getInode(t.ctx, t.tx, ino)
	if err != nil {
		return err
	}
	return t.link(in, dir, name)
}

// replaceNode returns a fresh inode of kind at p: an existing file of the
// same kind is reused (its content replaced by the caller), anything else
// non-directory is removed first.
func (v *Vault) replaceNode(t *txn, p string, kind Kind, mode uint32, target string) (*inode, error) {
	dirIno, name, err := v.resolveParent(t.ctx, t.tx, p)
	if err != nil {
		return nil, err
	}
	dir, err := t.dirInode(dirIno)
	if err != nil {
		return nil, err
	}
	if ino, _, ok, err := lookupDentry(t.ctx, t.tx, dir.ino, name); err != nil {
		return nil, err
	} else if ok {
		old, err := getInode(t.ctx, t.tx, ino)
		if err != nil {
			return nil, err
		}
		if old.kind == KindDir {
			return nil, wire.Errorf(wire.CodeIsDir, "%s is a directory in the vault", p).With("path", p)
		}
		if old.kind == kind && kind == KindFile {
			old.mode = mode
			return old, nil
		}
		if _, err := t.unlinkEntry(dir, name, KindFile); err != nil {
			return nil, err
		}
	}
	return t.create(dir, name, kind, mode, uint32(uidNow()), uint32(gidNow()), target)
}

// Export copies the vault file or tree at vaultPath to hostPath, keeping
// modes, symlinks, mtimes and hard links (among the names exported). An
// existing hostPath is refused
// (already_exists) unless force, which replaces files and merges directories.
func (v *Vault) Export(ctx context.Context, vaultPath, hostPath string, force bool) (TransferResult, error) {
	var res TransferResult
	vaultPath, err := CleanPath(vaultPath)
	if err != nil {
		return res, err
	}
	if _, err := os.Lstat(hostPath); err == nil && !force {
		return res, wire.Errorf(wire.CodeAlreadyExists, "export: %s exists on the host (use --force to overwrite)", hostPath).With("host_path", hostPath)
	}
	type dirTime struct {
		p     string
		mtime time.Time
		atime time.Time
	}
	var dirs []dirTime
	linked := map[uint64]string{} // inode of a file with several names -> its first host path
	err = v.view(ctx, "export "+vaultPath, func(q querier, _ state) error {
		ino, err := v.resolve(ctx, q, vaultPath, false)
		if err != nil {
			return err
		}
		top, err := getInode(ctx, q, ino)
		if err != nil {
			return err
		}
		return walkTree(ctx, q, entryOf(vaultPath, top), func(e Entry) error {
			rel := e.Path[len(vaultPath):]
			hp := filepath.Join(hostPath, filepath.FromSlash(rel))
			switch e.Kind {
			case KindDir:
				if err := os.Mkdir(hp, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
					return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
				}
				dirs = append(dirs, dirTime{hp, e.Mtime, e.Atime})
				if err := os.Chmod(hp, e.FileMode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
					return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
				}
				res.Dirs++
				return nil
			case KindSymlink:
				os.Remove(hp)
				if err := os.Symlink(e.Target, hp); err != nil {
					return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
				}
				_ = lutimes(hp, e.Atime, e.Mtime)
				res.Symlinks++
				return nil
			case KindFifo, KindSocket:
				if fi, err := os.Lstat(hp); err == nil && fi.IsDir() {
					if err := os.RemoveAll(hp); err != nil {
						return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
					}
				} else {
					os.Remove(hp)
				}
				typ := uint32(unix.S_IFIFO)
				if e.Kind == KindSocket {
					typ = unix.S_IFSOCK // a node without a socket, as a socket leaves behind
				}
				if err := unix.Mknod(hp, typ|0o600, 0); err != nil {
					return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
				}
				if err := os.Chmod(hp, e.FileMode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
					return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
				}
				if err := os.Chtimes(hp, e.Atime, e.Mtime); err != nil {
					return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
				}
				res.Special++
				return nil
			}
			in, err := getInode(ctx, q, int64(e.Ino))
			if err != nil {
				return err
			}
			if fi, err := os.Lstat(hp); err == nil && !fi.Mode().IsRegular() {
				if err := os.RemoveAll(hp); err != nil {
					return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
				}
			}
			if e.Nlink > 1 {
				// Hard links stay hard links among the exported names.
				if first, ok := linked[e.Ino]; ok {
					os.Remove(hp)
					if err := os.Link(first, hp); err != nil {
						return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
					}
					res.Files++
					return nil
				}
				linked[e.Ino] = hp
			}
			f, err := os.OpenFile(hp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
			}
			n, err := v.copyContent(ctx, q, in, f)
			if cerr := f.Close(); err == nil && cerr != nil {
				err = wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, cerr)
			}
			if err != nil {
				return err
			}
			if err := os.Chmod(hp, e.FileMode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
				return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
			}
			if err := os.Chtimes(hp, e.Atime, e.Mtime); err != nil {
				return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err)
			}
			res.Files++
			res.Bytes += n
			return nil
		})
	})
	// Directory times last: writing inside a directory changes its mtime.
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Chtimes(dirs[i].p, dirs[i].atime, dirs[i].mtime)
	}
	return res, err
}

// lutimes sets a symlink's own times.
func lutimes(p string, atime, mtime time.Time) error {
	ts := []syscall.Timespec{syscall.NsecToTimespec(atime.UnixNano()), syscall.NsecToTimespec(mtime.UnixNano())}
	return utimensat(p, ts)
}
