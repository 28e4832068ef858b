package vault

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
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
	Special  int64 `json:"special"` // named pipes, Unix socket nodes and device nodes
	Bytes    int64 `json:"bytes"`
	// SkippedDevices counts device nodes an export could not make: only
	// a privileged process may mknod(2) them on the host.
	SkippedDevices int64 `json:"skipped_devices,omitempty"`
}

// Import copies the host file or tree at hostPath to vaultPath in one
// transaction, keeping modes, symlinks (as links, never followed), mtimes
// and hard links (among the names imported). Existing vault files are
// replaced; directories are merged.
// Named pipes, Unix socket nodes and character and block device nodes are
// kept as such (a device node as its number: a mount opens nothing of it).
//
// hostPath's parent is followed as given; hostPath itself and everything
// beneath it are not: each entry is read relative to its directory's fd
// with O_NOFOLLOW, and one that is not, when opened, what it was when
// listed (replaced meanwhile, by a symlink say) fails the import with
// host_io rather than be read. A symlink is imported as a symlink,
// whatever it points to.
func (v *Vault) Import(ctx context.Context, hostPath, vaultPath string) (TransferResult, error) {
	return v.ImportWith(ctx, hostPath, vaultPath, ImportOptions{})
}

// ImportOptions says how Import reports its work.
type ImportOptions struct {
	// Progress is told the entries imported (every name: files,
	// directories, symlinks, special files) and the bytes of the regular
	// files, against totals that a walk of the host tree counts first
	// (an lstat of every entry, which costs what the walk costs, and only
	// when Progress is set). A tree that changes meanwhile makes the
	// totals an estimate; the last call has the counts imported.
	Progress ProgressFunc
}

// ImportWith is Import, reporting as opt says.
func (v *Vault) ImportWith(ctx context.Context, hostPath, vaultPath string, opt ImportOptions) (TransferResult, error) {
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
	parent, name := filepath.Dir(root), filepath.Base(root)
	if root == "/" {
		name = "."
	}
	pfd, err := unix.Open(parent, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return res, wire.Errorf(wire.CodeHostIO, "import %s: %w", hostPath, err).With("host_path", hostPath)
	}
	defer unix.Close(pfd)
	var final Work // for opt.Progress
	err = v.update(ctx, "import "+hostPath, func(t *txn) error {
		fi, err := lstatAt(pfd, name)
		if err != nil {
			return wire.Errorf(wire.CodeHostIO, "import %s: %w", hostPath, err).With("host_path", hostPath)
		}
		im := importer{v: v, t: t, linked: map[devIno]int64{}, res: &res, progress: opt.Progress}
		if opt.Progress != nil {
			im.total = hostWork(root)
			opt.Progress(Work{}, im.total)
		}
		if err := im.entry(pfd, name, root, vaultPath, fi); err != nil {
			return err
		}
		final = im.done
		t.audit("import", vaultPath, map[string]any{"host_path": root, "files": res.Files, "dirs": res.Dirs, "symlinks": res.Symlinks, "bytes": res.Bytes})
		return nil
	})
	if err == nil {
		opt.Progress.report(final, final) // committed
	}
	return res, err
}

// importer is one Import's walk of the host tree.
type importer struct {
	v      *Vault
	t      *txn
	linked map[devIno]int64 // host files with several names -> the vault inode made for the first
	res    *TransferResult

	progress    ProgressFunc // nil: none
	done, total Work
}

// advance counts an entry imported, with the bytes of its content.
func (im *importer) advance(bytes int64) {
	if im.progress != nil {
		im.done.Items++
		im.done.Bytes += bytes
		im.progress(im.done, Work{Items: max(im.total.Items, im.done.Items), Bytes: max(im.total.Bytes, im.done.Bytes)})
	}
}

// hostWork counts the entries of the host tree at root, and the bytes of
// its regular files (once for a file with several names), without
// following symlinks. What it cannot read it leaves out.
func hostWork(root string) Work {
	var w Work
	seen := map[devIno]bool{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		w.Items++
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			key := devIno{uint64(st.Dev), st.Ino}
			if seen[key] {
				return nil
			}
			seen[key] = true
		}
		w.Bytes += fi.Size()
		return nil
	})
	return w
}

// entry imports the host entry name in dirfd (at host path hp, listed as
// fi) to vault path vp, and what is beneath it.
func (im *importer) entry(dirfd int, name, hp, vp string, fi hostInfo) error {
	v, t, res := im.v, im.t, im.res
	if err := t.ctx.Err(); err != nil {
		return err
	}
	mode := hostMode(fi)
	var in *inode
	var err error
	sub := -1 // a directory's own fd, to read its entries
	switch {
	case fi.IsDir():
		if in, err = v.mkdirAll(t, vp, mode); err != nil {
			return err
		}
		in.mode = mode
		if sub, err = openRead(dirfd, name, hp, fi, true); err != nil {
			return err
		}
		defer unix.Close(sub)
		res.Dirs++
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := readlinkAt(dirfd, name)
		if err != nil {
			return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, err)
		}
		if in, err = v.replaceNode(t, vp, KindSymlink, 0o777, target); err != nil {
			return err
		}
		res.Symlinks++
	case fi.Mode().IsRegular():
		var key devIno
		if fi.st.Nlink > 1 {
			key = devIno{fi.st.Dev, fi.st.Ino}
			if target, seen := im.linked[key]; seen {
				// Another name of a file imported already: a hard link.
				res.Files++
				im.advance(0)
				return v.linkAt(t, vp, target)
			}
		}
		if in, err = v.replaceNode(t, vp, KindFile, mode, ""); err != nil {
			return err
		}
		fd, err := openRead(dirfd, name, hp, fi, false)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), hp)
		err = t.writeAll(in, f)
		f.Close()
		if err != nil {
			return err
		}
		if key != (devIno{}) {
			im.linked[key] = in.ino
		}
		res.Files++
		res.Bytes += in.size
	case fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0:
		kind, _ := hostKind(fi)
		if in, err = v.replaceNode(t, vp, kind, mode, ""); err != nil {
			return err
		}
		res.Special++
	case fi.Mode()&fs.ModeDevice != 0:
		kind := KindBlockDev
		if fi.Mode()&fs.ModeCharDevice != 0 {
			kind = KindCharDev
		}
		if in, err = v.replaceNode(t, vp, kind, mode, rdevTarget(uint64(fi.st.Rdev))); err != nil {
			return err
		}
		res.Special++
	default:
		return nil // nothing else has a place in a vault
	}
	in.mtime = fi.ModTime().UnixNano()
	in.atime = time.Unix(fi.st.Atim.Unix()).UnixNano()
	if err := t.saveInode(in); err != nil {
		return err
	}
	if err := t.recordVersionAt(in, vp, "import"); err != nil {
		return err
	}
	if in.kind == KindFile {
		im.advance(in.size)
	} else {
		im.advance(0)
	}
	if sub < 0 {
		return nil
	}
	names, err := readNames(sub)
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "read %s: %w", hp, err)
	}
	for _, n := range names {
		chp := filepath.Join(hp, n)
		cfi, err := lstatAt(sub, n)
		if err != nil {
			return wire.Errorf(wire.CodeHostIO, "read %s: %w", chp, err)
		}
		if err := im.entry(sub, n, chp, path.Join(vp, n), cfi); err != nil {
			return err
		}
	}
	return nil
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

// ExportOptions says how Export treats what it finds on the host and what
// it keeps of the vault's modes.
type ExportOptions struct {
	// Force replaces existing host entries (files, symlinks, special
	// files, and directories where the vault has something else) and
	// merges directories; without it an existing host path is refused.
	Force bool
	// PreserveSetid keeps the setuid and setgid bits of regular files.
	// Without it they are dropped: a file written in the vault must not
	// become a set-id program of whoever exports it.
	PreserveSetid bool
	// Progress is told the entries exported (every name: files,
	// directories, symlinks, special files) and the bytes of the regular
	// files, against totals counted by a walk of the tree's metadata
	// first, in the same read transaction (only when Progress is set).
	Progress ProgressFunc
}

// Export copies the vault file or tree at vaultPath to hostPath, as
// ExportWith with only Force set.
func (v *Vault) Export(ctx context.Context, vaultPath, hostPath string, force bool) (TransferResult, error) {
	return v.ExportWith(ctx, vaultPath, hostPath, ExportOptions{Force: force})
}

// ExportWith copies the vault file or tree at vaultPath to hostPath,
// keeping modes (less setuid/setgid on regular files unless
// opt.PreserveSetid; sticky is kept), symlinks, mtimes and hard links
// (among the names exported). An existing hostPath is refused
// (already_exists) unless opt.Force, which replaces files and merges
// directories.
//
// hostPath is resolved as given, symlinks included, when the vault path
// is a directory: it names the destination root. For a file, symlink or
// special file, only its parent directory is; the entry itself is never
// followed. Beneath the root nothing is followed: every name is resolved
// with no symlink allowed in it and every create, chmod, link, time
// change and removal is made relative to a directory fd or on the fd of
// the file written. A host entry in the way (a symlink where the vault
// has a directory, say) is removed, never written through, under Force,
// and refused (already_exists) without it. A regular file is replaced by
// a new file, never rewritten in place, so a host hard link to it keeps
// its content. Export never changes anything outside the root and never
// follows a link the vault's content put there; it fails with host_io on
// any host error, leaving what it wrote so far.
func (v *Vault) ExportWith(ctx context.Context, vaultPath, hostPath string, opt ExportOptions) (TransferResult, error) {
	var res TransferResult
	vaultPath, err := CleanPath(vaultPath)
	if err != nil {
		return res, err
	}
	if _, err := os.Lstat(hostPath); err == nil && !opt.Force {
		return res, wire.Errorf(wire.CodeAlreadyExists, "export: %s exists on the host (use --force to overwrite)", hostPath).With("host_path", hostPath)
	}
	abs, err := filepath.Abs(hostPath)
	if err != nil {
		return res, wire.Errorf(wire.CodeHostIO, "export %s: %w", hostPath, err)
	}
	type dirDone struct {
		rel          string
		mode         uint32
		atime, mtime time.Time
	}
	var dirs []dirDone
	var d *hostDest
	type first struct {
		rel string
		id  devIno
	}
	linked := map[uint64]first{} // inode of a file with several names -> its first host name
	var done tally               // for opt.Progress
	err = v.view(ctx, "export "+vaultPath, func(q querier, _ state) error {
		ino, err := v.resolve(ctx, q, vaultPath, false)
		if err != nil {
			return err
		}
		top, err := getInode(ctx, q, ino)
		if err != nil {
			return err
		}
		if d, err = openDest(abs, top.kind == KindDir, opt.Force); err != nil {
			return err
		}
		var total Work
		if opt.Progress != nil {
			if total, err = treeWork(ctx, q, entryOf(vaultPath, top)); err != nil {
				return err
			}
			opt.Progress(Work{}, total)
		}
		return walkTree(ctx, q, entryOf(vaultPath, top), reporting(opt.Progress, total, &done, func(e Entry) error {
			rel := d.top
			if d.top == "" {
				rel = strings.TrimPrefix(e.Path[len(vaultPath):], "/")
			}
			mode := uint32(e.Mode) & 0o7777
			if e.Kind == KindFile && !opt.PreserveSetid {
				mode &^= 0o6000
			}
			switch e.Kind {
			case KindDir:
				if err := d.mkdir(rel); err != nil {
					return err
				}
				dirs = append(dirs, dirDone{rel, mode, e.Atime, e.Mtime})
				res.Dirs++
				return nil
			case KindSymlink:
				dirfd, name, err := d.place(rel, func(dirfd int, name string) error { return unix.Symlinkat(e.Target, dirfd, name) })
				if err != nil {
					return err
				}
				_ = lutimesAt(dirfd, name, e.Atime, e.Mtime)
				res.Symlinks++
				return nil
			case KindFifo, KindSocket:
				typ := uint32(unix.S_IFIFO)
				if e.Kind == KindSocket {
					typ = unix.S_IFSOCK // a node without a socket, as a socket leaves behind
				}
				dirfd, name, err := d.place(rel, func(dirfd int, name string) error { return unix.Mknodat(dirfd, name, typ|0o600, 0) })
				if err != nil {
					return err
				}
				if err := chmodAt(dirfd, name, mode); err != nil {
					return d.fail(rel, err)
				}
				if err := lutimesAt(dirfd, name, e.Atime, e.Mtime); err != nil {
					return d.fail(rel, err)
				}
				res.Special++
				return nil
			case KindCharDev, KindBlockDev:
				typ := uint32(unix.S_IFBLK)
				if e.Kind == KindCharDev {
					typ = unix.S_IFCHR
				}
				dirfd, name, err := d.place(rel, func(dirfd int, name string) error { return unix.Mknodat(dirfd, name, typ|0o600, int(e.Rdev)) })
				if errors.Is(err, unix.EPERM) {
					res.SkippedDevices++ // only a privileged process makes device nodes
					return nil
				}
				if err != nil {
					return err
				}
				if err := chmodAt(dirfd, name, mode); err != nil {
					return d.fail(rel, err)
				}
				if err := lutimesAt(dirfd, name, e.Atime, e.Mtime); err != nil {
					return d.fail(rel, err)
				}
				res.Special++
				return nil
			}
			in, err := getInode(ctx, q, int64(e.Ino))
			if err != nil {
				return err
			}
			if f, ok := linked[e.Ino]; ok && e.Nlink > 1 {
				// Hard links stay hard links among the exported names.
				if err := d.link(f.rel, rel, f.id); err != nil {
					return err
				}
				res.Files++
				return nil
			}
			fd := -1
			if _, _, err := d.place(rel, func(dirfd int, name string) (err error) {
				fd, err = unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
				return err
			}); err != nil {
				return err
			}
			f := os.NewFile(uintptr(fd), filepath.Join(d.path, filepath.FromSlash(rel)))
			defer f.Close()
			n, err := v.copyContent(ctx, q, in, f)
			if err != nil {
				return withFile(err, e.Path)
			}
			if err := unix.Fchmod(fd, mode); err != nil {
				return d.fail(rel, err)
			}
			if err := futimes(fd, e.Atime, e.Mtime); err != nil {
				return d.fail(rel, err)
			}
			if e.Nlink > 1 {
				st, err := fstatInfo(fd, "")
				if err != nil {
					return d.fail(rel, err)
				}
				linked[e.Ino] = first{rel, devIno{st.st.Dev, st.st.Ino}}
			}
			if err := f.Close(); err != nil {
				return d.fail(rel, err)
			}
			res.Files++
			res.Bytes += n
			return nil
		}))
	})
	if d == nil {
		return res, err
	}
	defer d.close()
	// Directory modes and times last: writing inside a directory changes
	// its mtime, and a mode without write permission would stop the copy.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err != nil {
			break
		}
		err = d.finishDir(dirs[i].rel, dirs[i].mode, dirs[i].atime, dirs[i].mtime)
	}
	if err == nil {
		opt.Progress.report(done.Work, done.Work)
	}
	return res, err
}

// hostDest is an export's destination: the directory fd everything is
// written beneath.
type hostDest struct {
	path  string // the destination as given, made absolute (for messages)
	base  string // the directory root is open on
	root  int
	top   string // the name of the exported entry in root; "" when root is it (a directory)
	force bool

	// The parent directory of the last entry placed, kept open.
	lastRel string
	lastFd  int
}

// openDest opens the destination of an export to abs: abs itself for a
// directory (made if missing; a non-directory in its place is replaced
// under force), else its parent. The path is followed as given.
func openDest(abs string, isDir, force bool) (*hostDest, error) {
	d := &hostDest{path: abs, base: abs, root: -1, lastFd: -1, force: force}
	if !isDir {
		if abs == "/" {
			return nil, wire.Errorf(wire.CodeInvalidInput, "export: / is not a file's name").With("host_path", abs)
		}
		d.base, d.top = filepath.Dir(abs), filepath.Base(abs)
		fd, err := unix.Open(d.base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, d.fail("", err)
		}
		d.root = fd
		return d, nil
	}
	const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	fd, err := unix.Open(abs, dirFlags, 0)
	if err == nil {
		d.root = fd
		return d, nil
	}
	parent, perr := unix.Open(filepath.Dir(abs), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if perr != nil {
		return nil, d.fail("", perr)
	}
	defer unix.Close(parent)
	name := filepath.Base(abs)
	err = unix.Mkdirat(parent, name, 0o700)
	if errors.Is(err, unix.EEXIST) {
		if !force {
			return nil, wire.Errorf(wire.CodeAlreadyExists, "export: %s exists on the host (use --force to overwrite)", abs).With("host_path", abs)
		}
		// Not a directory (open failed): replaced, never followed.
		if err = removeAt(parent, name); err == nil {
			err = unix.Mkdirat(parent, name, 0o700)
		}
	}
	if err != nil {
		return nil, d.fail("", err)
	}
	if fd, err = unix.Openat(parent, name, dirFlags|unix.O_NOFOLLOW, 0); err != nil {
		return nil, d.fail("", err)
	}
	d.root = fd
	return d, nil
}

func (d *hostDest) close() {
	if d.lastFd >= 0 {
		unix.Close(d.lastFd)
	}
	unix.Close(d.root)
}

// fail is err as host_io, naming the host path of rel.
func (d *hostDest) fail(rel string, err error) error {
	hp := filepath.Join(d.base, filepath.FromSlash(rel))
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return wire.Errorf(wire.CodeHostIO, "export %s: a symlink is in the way (not followed): %w", hp, err).With("host_path", hp)
	}
	return wire.Errorf(wire.CodeHostIO, "export %s: %w", hp, err).With("host_path", hp)
}

// parent returns the fd of rel's parent directory (root or one opened
// beneath it, owned by d) and rel's last name.
func (d *hostDest) parent(rel string) (int, string, error) {
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		return d.root, name, nil
	}
	if d.lastFd >= 0 && d.lastRel == dir {
		return d.lastFd, name, nil
	}
	fd, err := openBeneath(d.root, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", d.fail(dir, err)
	}
	if d.lastFd >= 0 {
		unix.Close(d.lastFd)
	}
	d.lastRel, d.lastFd = dir, fd
	return fd, name, nil
}

// place makes the entry rel with mk (called with its parent's fd and its
// name), replacing whatever is there under force (refused without it).
func (d *hostDest) place(rel string, mk func(dirfd int, name string) error) (int, string, error) {
	dirfd, name, err := d.parent(rel)
	if err != nil {
		return -1, "", err
	}
	err = mk(dirfd, name)
	if errors.Is(err, unix.EEXIST) {
		if !d.force {
			return -1, "", d.exists(rel)
		}
		if err = removeAt(dirfd, name); err == nil {
			err = mk(dirfd, name)
		}
	}
	if err != nil {
		return -1, "", d.fail(rel, err)
	}
	return dirfd, name, nil
}

func (d *hostDest) exists(rel string) error {
	hp := filepath.Join(d.base, filepath.FromSlash(rel))
	return wire.Errorf(wire.CodeAlreadyExists, "export: %s exists on the host (use --force to overwrite)", hp).With("host_path", hp)
}

// mkdir makes directory rel; an existing directory is merged, anything
// else there is replaced under force.
func (d *hostDest) mkdir(rel string) error {
	if rel == "" {
		return nil // root, opened (or made) by openDest
	}
	dirfd, name, err := d.parent(rel)
	if err != nil {
		return err
	}
	err = unix.Mkdirat(dirfd, name, 0o700)
	if errors.Is(err, unix.EEXIST) {
		if !d.force {
			return d.exists(rel)
		}
		st, serr := lstatAt(dirfd, name)
		if serr == nil && st.IsDir() {
			return nil
		}
		if err = removeAt(dirfd, name); err == nil {
			err = unix.Mkdirat(dirfd, name, 0o700)
		}
	}
	if err != nil {
		return d.fail(rel, err)
	}
	return nil
}

// link makes rel another name of the file first (written by this export,
// whose identity is id), checking the new name is that file.
func (d *hostDest) link(first, rel string, id devIno) error {
	ofd, oname, err := d.parent(first)
	if err != nil {
		return err
	}
	// parent's fd is shared: keep the first one's own.
	ofd, err = unix.Dup(ofd)
	if err != nil {
		return d.fail(first, err)
	}
	defer unix.Close(ofd)
	dirfd, name, err := d.place(rel, func(dirfd int, name string) error { return unix.Linkat(ofd, oname, dirfd, name, 0) })
	if err != nil {
		return err
	}
	st, err := lstatAt(dirfd, name)
	if err != nil {
		return d.fail(rel, err)
	}
	if (devIno{st.st.Dev, st.st.Ino}) != id {
		unix.Unlinkat(dirfd, name, 0)
		return wire.Errorf(wire.CodeHostIO, "export %s: %s was replaced on the host while exporting", filepath.Join(d.base, filepath.FromSlash(rel)), filepath.Join(d.base, filepath.FromSlash(first)))
	}
	return nil
}

// finishDir gives directory rel its mode and times.
func (d *hostDest) finishDir(rel string, mode uint32, atime, mtime time.Time) error {
	fd := d.root
	if rel != "" {
		var err error
		if fd, err = openBeneath(d.root, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
			return d.fail(rel, err)
		}
		defer unix.Close(fd)
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return d.fail(rel, err)
	}
	_ = futimes(fd, atime, mtime)
	return nil
}
