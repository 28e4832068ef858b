package mount

import (
	"context"

	"avfs/vault"
)

// Store is what the mount needs from a vault. *vault.Vault satisfies it.
type Store interface {
	GetAttr(ctx context.Context, ino uint64) (vault.Attr, error)
	Lookup(ctx context.Context, parent uint64, name string) (vault.Attr, error)
	ReadDir(ctx context.Context, ino uint64) ([]vault.DirEntry, error)
	Mknod(ctx context.Context, parent uint64, name string, spec vault.NodeSpec) (vault.Attr, error)
	ReserveIno(ctx context.Context) (uint64, error)
	CreateFileStaged(ctx context.Context, parent uint64, name string, spec vault.NodeSpec, c vault.FileCommit) (*vault.Content, error)
	Link(ctx context.Context, ino, parent uint64, name string) (vault.Attr, error)
	Unlink(ctx context.Context, parent uint64, name string) error
	Rmdir(ctx context.Context, parent uint64, name string) error
	Rename(ctx context.Context, oldParent uint64, oldName string, newParent uint64, newName string, flags vault.RenameFlags) error
	SetAttr(ctx context.Context, ino uint64, s vault.SetAttr) (vault.Attr, error)
	ReadAt(ctx context.Context, ino uint64, p []byte, off int64) (int, error)
	PersistStaged(ctx context.Context, ino uint64, c vault.FileCommit) (*vault.Content, error)
	// StageChunks, ChunkByHash and ReleaseStaged store an open file's
	// full chunks as they fill, ahead of its commit (see stager).
	StageChunks(ctx context.Context, chunks []vault.StagedChunk) error
	ChunkByHash(ctx context.Context, hash []byte) ([]byte, error)
	ReleaseStaged(ctx context.Context, owner vault.StageOwner) error
	Content(ctx context.Context, ino uint64) (*vault.Content, error)
	EmptyContent(a vault.Attr) *vault.Content
	GetXattr(ctx context.Context, ino uint64, name string) ([]byte, error)
	ListXattr(ctx context.Context, ino uint64) ([]string, error)
	SetXattr(ctx context.Context, ino uint64, name string, value []byte, flags int) error
	RemoveXattr(ctx context.Context, ino uint64, name string) error
	Usage(ctx context.Context) (vault.Usage, error)
	Lock(ctx context.Context, name, info string) error
	Unlock(ctx context.Context, name string) error
	// Hold keeps a deleted file's content from history retention while
	// the mount still reads it through an open file (vault.Vault.Hold).
	Hold(ino uint64) (release func())
	// StartRetention bounds history in the background while the mount
	// serves writes (vault.Vault.StartRetention).
	StartRetention()
	// StartCheckpointer copies the write-ahead log back into the vault
	// file in the background, off the write path and out of unmount
	// (vault.Vault.StartCheckpointer).
	StartCheckpointer()
}

var _ Store = (*vault.Vault)(nil)
