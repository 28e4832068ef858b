package vault

import (
	"context"
	"io"
	"os"
	"strings"

	"avfs/wire"
)

// maxSymlinkHops bounds symlink resolution, as the kernel does (ELOOP).
const maxSymlinkHops = 40

func uidNow() int { return os.Getuid() }
func gidNow() int { return os.Getgid() }

// CleanPath returns the vault-absolute form of p ("a/b" and "/a/./b" give
// "/a/b"). A path that climbs above the root, or holds a NUL byte, or a
// name longer than 255 bytes, is invalid_path. Names are bytes, as in the
// kernel: a path that is not valid UTF-8 (which the mount lets programs
// make) is kept byte for byte, never refused or rewritten.
func CleanPath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", wire.Errorf(wire.CodeInvalidPath, "invalid path %q", p).With("path", p)
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(parts) == 0 {
				return "", wire.Errorf(wire.CodeInvalidPath, "path %q escapes the vault root", p).With("path", p)
			}
			parts = parts[:len(parts)-1]
		default:
			if len(c) > 255 {
				return "", wire.Errorf(wire.CodeInvalidPath, "path component too long in %q", p).With("path", p)
			}
			parts = append(parts, c)
		}
	}
	return "/" + strings.Join(parts, "/"), nil
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// resolve returns the inode at the clean path p. Symlinks in the middle of
// the path are followed (targets are read inside the vault: an absolute
// target starts at the vault root); the last one only when follow is set.
func (v *Vault) resolve(ctx context.Context, q querier, p string, follow bool) (int64, error) {
	hops := 0
	return v.walk(ctx, q, rootIno, splitPath(p), follow, &hops, p)
}

func (v *Vault) walk(ctx context.Context, q querier, dir int64, parts []string, follow bool, hops *int, orig string) (int64, error) {
	cur := dir
	stack := []int64{} // parents, for ".." in symlink targets
	for i := 0; i < len(parts); i++ {
		name := parts[i]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return 0, wire.Errorf(wire.CodeInvalidPath, "%s: a symlink leads outside the vault", orig).With("path", orig)
			}
			cur, stack = stack[len(stack)-1], stack[:len(stack)-1]
			continue
		}
		in, err := getInode(ctx, q, cur)
		if err != nil {
			return 0, err
		}
		if in.kind != KindDir {
			return 0, wire.Errorf(wire.CodeNotDir, "%s: a path component is not a directory", orig).With("path", orig)
		}
		ino, _, ok, err := lookupDentry(ctx, q, cur, name)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, wire.Errorf(wire.CodeNotFound, "%s: no such file or directory", orig).With("path", orig)
		}
		last := i == len(parts)-1
		if !last || follow {
			child, err := getInode(ctx, q, ino)
			if err != nil {
				return 0, err
			}
			if child.kind == KindSymlink {
				*hops++
				if *hops > maxSymlinkHops {
					return 0, wire.Errorf(wire.CodeInvalidPath, "%s: too many levels of symbolic links", orig).With("path", orig)
				}
				target := child.target
				var rest []string
				rest = append(rest, splitPath(target)...)
				rest = append(rest, parts[i+1:]...)
				if strings.HasPrefix(target, "/") {
					return v.walk(ctx, q, rootIno, rest, follow, hops, orig)
				}
				// Relative: continue from the link's directory with the same parents.
				sub, err := v.walkFrom(ctx, q, cur, stack, rest, follow, hops, orig)
				return sub, err
			}
		}
		stack = append(stack, cur)
		cur = ino
	}
	return cur, nil
}

// walkFrom resolves parts starting in dir whose ancestors are stack.
func (v *Vault) walkFrom(ctx context.Context, q querier, dir int64, stack []int64, parts []string, follow bool, hops *int, orig string) (int64, error) {
	// Climb with ".." against the known ancestors first, then walk down.
	for len(parts) > 0 && (parts[0] == ".." || parts[0] == "." || parts[0] == "") {
		if parts[0] == ".." {
			if len(stack) == 0 {
				return 0, wire.Errorf(wire.CodeInvalidPath, "%s: a symlink leads outside the vault", orig).With("path", orig)
			}
			dir, stack = stack[len(stack)-1], stack[:len(stack)-1]
		}
		parts = parts[1:]
	}
	return v.walk(ctx, q, dir, parts, follow, hops, orig)
}

// resolveParent returns the directory that holds the clean path p and p's last name.
func (v *Vault) resolveParent(ctx context.Context, q querier, p string) (int64, string, error) {
	parts := splitPath(p)
	if len(parts) == 0 {
		return 0, "", wire.Errorf(wire.CodeInvalidPath, "the vault root has no parent").With("path", p)
	}
	dir, err := v.resolve(ctx, q, "/"+strings.Join(parts[:len(parts)-1], "/"), true)
	if err != nil {
		return 0, "", err
	}
	return dir, parts[len(parts)-1], nil
}

// copyContent streams a file's content to w, up to 16 chunks at a time.
func (v *Vault) copyContent(ctx context.Context, q querier, in *inode, w io.Writer) (int64, error) {
	// Up to 16 chunks a read (one query), no more than the file needs.
	buf := make([]byte, max(min(in.size, readBatch*ChunkSize), 1))
	var off int64
	for off < in.size {
		n, err := v.readAt(ctx, q, in, buf, off)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return off, wire.Errorf(wire.CodeHostIO, "write output: %w", werr)
			}
			off += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return off, err
		}
	}
	return off, nil
}
