package runner

import (
	"context"
	"strings"

	"avfs/engine"
	"avfs/vault"
)

// maxLinkHops caps the symlinks vaultFiles follows for one path, as the
// kernel's ELOOP does.
const maxLinkHops = 40

// Workspace returns the open vault v as the parser's engine.Workspace
// (see vaultFiles): what proxy exec decides with, for callers that parse
// as it does (avfs policy eval).
func Workspace(v *vault.Vault) engine.Workspace { return vaultFiles{v} }

// vaultFiles is the open vault as engine.Workspace: what the parser may
// ask about the files of the vault a command runs in. It reads the
// vault's tables only (the vault is not mounted yet when the command is
// decided) and never changes anything.
type vaultFiles struct{ v *vault.Vault }

// IsFile reports whether the vault-absolute path p names a regular file,
// following symlinks one name at a time as the command would see them in
// its view. A symlink whose target is absolute, or climbs above the vault
// root, means something else in the view than in the vault (the view's
// /usr, the host), so it counts as missing; so do more than maxLinkHops
// links, a name that is not a directory on the way, and any error.
func (f vaultFiles) IsFile(ctx context.Context, p string) bool {
	// Most names asked about do not exist: one lookup says so.
	if _, err := f.v.Stat(ctx, p); err != nil {
		return false
	}
	names := strings.Split(strings.Trim(p, "/"), "/")
	dir, hops := "/", 0
	for len(names) > 0 {
		name := names[0]
		names = names[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if dir == "/" {
				return false
			}
			dir = dir[:strings.LastIndexByte(dir, '/')]
			if dir == "" {
				dir = "/"
			}
			continue
		}
		next := strings.TrimSuffix(dir, "/") + "/" + name
		e, err := f.v.Stat(ctx, next)
		if err != nil {
			return false
		}
		switch e.Kind {
		case vault.KindSymlink:
			if hops++; hops > maxLinkHops || strings.HasPrefix(e.Target, "/") {
				return false
			}
			names = append(strings.Split(e.Target, "/"), names...)
		case vault.KindDir:
			dir = next
		case vault.KindFile:
			return len(names) == 0
		default:
			return false
		}
	}
	return false // p names a directory
}
