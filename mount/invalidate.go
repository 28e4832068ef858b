package mount

import (
	"context"
	"path"
	"strings"

	"github.com/hanwen/go-fuse/v2/fs"
)

// Invalidate makes the kernel, and the mount's own caches, forget what
// they know of the vault paths given (vault-absolute, such as the changes
// of a restored checkpoint), after the vault changed beneath a live mount
// by a route other than the mount itself: a checkpoint restored by the
// process that serves it (another process is refused while the mount
// lives).
//
// Why: a writer mount lets the kernel trust names, attributes, missing
// names and page contents for WriterCacheTime, because every change
// normally reaches the vault through it. A restore does not, so without
// this the kernel would go on answering from what it cached: a file
// deleted after the checkpoint and back again would stay missing (the
// kernel keeps a negative entry for it), an old size or old bytes would be
// read.
//
// How: for each path whose parent directory the kernel knows (it has
// looked it up), the name is dropped from the kernel's name cache
// (positive or negative), the node's attributes and cached pages are
// dropped, and so are the parent directory's (its size, times and
// listing). A path whose parent the kernel never looked up has nothing
// cached. Cost: one walk of the path's components in go-fuse's tree and
// up to three notifications per path; nothing is read from the vault.
//
// It must not be called from a request the mount is serving (the kernel
// would wait for that request while the notification waits for the
// kernel). Errors of single notifications (the kernel forgot the entry
// meanwhile: ENOENT) are ignored: there is then nothing left to forget.
// Safe for concurrent use; a session that is not mounted does nothing.
func (s *Session) Invalidate(ctx context.Context, paths []string) {
	s.mu.Lock()
	root, mounted := s.root, s.state == StateMounted
	s.mu.Unlock()
	if root == nil || !mounted {
		return
	}
	dirs := map[*fs.Inode]bool{}
	for _, p := range paths {
		if ctx.Err() != nil {
			return
		}
		p = path.Clean("/" + p)
		if p == "/" {
			forget(&root.Inode)
			dirs[&root.Inode] = true
			continue
		}
		parent := &root.Inode
		for _, name := range strings.Split(strings.TrimPrefix(path.Dir(p), "/"), "/") {
			if name == "" {
				continue
			}
			if parent = parent.GetChild(name); parent == nil {
				break
			}
		}
		if parent == nil {
			continue
		}
		name := path.Base(p)
		if child := parent.GetChild(name); child != nil {
			forget(child)
		}
		_ = parent.NotifyEntry(name)
		dirs[parent] = true
	}
	for d := range dirs {
		forget(d)
	}
}

// forget drops the kernel's attributes and pages of in, and what the
// mount remembers of its content and extended attributes.
func forget(in *fs.Inode) {
	if n, ok := in.Operations().(*node); ok {
		n.mu.Lock()
		n.token = cacheToken{}
		n.xa.none = false
		n.mu.Unlock()
	}
	_ = in.NotifyContent(0, 0)
}
