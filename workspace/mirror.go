package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"avfs/vault"
	"avfs/wire"
)

// Mirror makes the host directory dir hold what the vault holds: the
// vault's tree is exported over it (files replaced, directories merged:
// vault.ExportWith with Force), then every host entry the vault does not
// have is removed. It is what `avfs workspace down --export` leaves in the
// project directory once the mount is gone.
//
// It never follows a symlink beneath dir: export does not, and removal
// descends only into real directories that are directories in the vault
// too (a symlink is removed as a link). It must not run while something
// else changes dir. removed counts the host entries removed (a directory
// and what it held count as one). On a host error it stops, leaving what it
// did so far (host_io).
func Mirror(ctx context.Context, v *vault.Vault, dir string) (res vault.TransferResult, removed int64, err error) {
	if res, err = v.ExportWith(ctx, "/", dir, vault.ExportOptions{Force: true}); err != nil {
		return res, 0, err
	}
	removed, err = prune(ctx, v, dir, "/")
	return res, removed, err
}

// prune removes the entries of the host directory hostDir that the vault
// directory vdir does not have, and recurses into those both have as
// directories.
func prune(ctx context.Context, v *vault.Vault, hostDir, vdir string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ents, err := v.List(ctx, vdir)
	if err != nil {
		return 0, err
	}
	inVault := make(map[string]vault.Entry, len(ents))
	for _, e := range ents {
		inVault[e.Name] = e
	}
	host, err := os.ReadDir(hostDir)
	if err != nil {
		return 0, wire.Errorf(wire.CodeHostIO, "workspace: read %s: %v", hostDir, err).With("host_path", hostDir)
	}
	var n int64
	for _, h := range host {
		p := filepath.Join(hostDir, h.Name())
		ve, ok := inVault[h.Name()]
		if !ok {
			if err := os.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return n, wire.Errorf(wire.CodeHostIO, "workspace: remove %s: %v", p, err).With("host_path", p)
			}
			n++
			continue
		}
		// ReadDir's type is lstat's: a symlink is never a directory here.
		if h.Type().IsDir() && ve.Kind == vault.KindDir {
			m, err := prune(ctx, v, p, path.Join(vdir, h.Name()))
			n += m
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}
