package main

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The loopback without passthrough is the FUSE floor of a file system
// whose data the server itself must answer (as avfs's, from SQLite): the
// same go-fuse loopback, but its files hide their descriptors from the
// kernel, so reads and writes go through the server and the kernel's
// FUSE page cache (kept across opens, as avfs keeps it), where the
// passthrough loopback hands them to the backing file.

// noPassNode is a loopback node whose open files are noPassFile, and
// whose children are noPassNodes too.
type noPassNode struct{ *fs.LoopbackNode }

func newNoPassRoot(path string) (fs.InodeEmbedder, error) {
	root, err := fs.NewLoopbackRoot(path)
	if err != nil {
		return nil, err
	}
	return &noPassNode{root.(*fs.LoopbackNode)}, nil
}

func (n *noPassNode) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &noPassNode{ops.(*fs.LoopbackNode)}
}

func (n *noPassNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, en := n.LoopbackNode.Open(ctx, flags)
	if en != 0 {
		return nil, 0, en
	}
	return &noPassFile{fh.(*fs.LoopbackFile)}, fl | fuse.FOPEN_KEEP_CACHE, 0
}

func (n *noPassNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, en := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if en != 0 {
		return nil, nil, 0, en
	}
	return in, &noPassFile{fh.(*fs.LoopbackFile)}, fl | fuse.FOPEN_KEEP_CACHE, 0
}

// noPassFile forwards a loopback file's operations but not its
// descriptor (fs.FilePassthroughFder).
type noPassFile struct{ f *fs.LoopbackFile }

// Read copies the data into buf, as a server answering from its own
// store does (the loopback's own Read would splice its descriptor).
func (p *noPassFile) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	fd, ok := p.f.PassthroughFd()
	if !ok {
		return nil, syscall.EBADF
	}
	n, err := syscall.Pread(fd, buf, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(buf[:n]), 0
}
func (p *noPassFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return p.f.Write(ctx, data, off)
}
func (p *noPassFile) Flush(ctx context.Context) syscall.Errno   { return p.f.Flush(ctx) }
func (p *noPassFile) Release(ctx context.Context) syscall.Errno { return p.f.Release(ctx) }
func (p *noPassFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return p.f.Fsync(ctx, flags)
}
func (p *noPassFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return p.f.Getattr(ctx, out)
}
func (p *noPassFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return p.f.Setattr(ctx, in, out)
}
func (p *noPassFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return p.f.Lseek(ctx, off, whence)
}
func (p *noPassFile) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return p.f.Allocate(ctx, off, size, mode)
}

var (
	_ fs.NodeOpener      = (*noPassNode)(nil)
	_ fs.NodeCreater     = (*noPassNode)(nil)
	_ fs.NodeWrapChilder = (*noPassNode)(nil)
	_ fs.FileReader      = (*noPassFile)(nil)
	_ fs.FileWriter      = (*noPassFile)(nil)
)
