package vault

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"avfs/wire"
)

// fileExt is the extension of vault files.
const fileExt = ".avfs"

// DefaultName is the vault used when none is named or current.
const DefaultName = "default"

// ValidName checks a vault name: [A-Za-z0-9][A-Za-z0-9_-]{0,63}. (Not a
// regexp: compiling one with a bounded repetition at startup costs every
// command.)
func ValidName(name string) error {
	ok := len(name) >= 1 && len(name) <= 64
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '-')
	}
	if !ok {
		return wire.Errorf(wire.CodeInvalidInput, "invalid vault name %q: use 1-64 letters, digits, '_' or '-', starting with a letter or digit", name).With("vault", name)
	}
	return nil
}

// Store is the set of named vaults in a state directory ($AVFS_HOME):
// vaults live at <dir>/vaults/<name>.avfs, the current vault's name in <dir>/current.
type Store struct {
	Dir  string
	Opts Options
}

// NewStore returns the store rooted at dir.
func NewStore(dir string, opts Options) *Store { return &Store{Dir: dir, Opts: opts} }

// PathOf returns the file of the vault called name.
func (s *Store) PathOf(name string) string {
	return filepath.Join(s.Dir, "vaults", name+fileExt)
}

func (s *Store) ensureDir() error {
	if err := os.MkdirAll(filepath.Join(s.Dir, "vaults"), 0o700); err != nil {
		return wire.Errorf(wire.CodeHostIO, "create state directory: %w", err)
	}
	return nil
}

// Create makes a new vault called name.
func (s *Store) Create(ctx context.Context, name string) (*Vault, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	return Create(ctx, s.PathOf(name), name, s.Opts)
}

// Open opens the vault called name.
func (s *Store) Open(ctx context.Context, name string) (*Vault, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	return Open(ctx, s.PathOf(name), s.Opts)
}

// OpenOrCreate opens name, creating it when it is the default vault and
// does not exist yet.
func (s *Store) OpenOrCreate(ctx context.Context, name string) (*Vault, error) {
	v, err := s.Open(ctx, name)
	if wire.HasCode(err, wire.CodeVaultNotFound) && name == DefaultName {
		v, err = s.Create(ctx, name)
		if wire.HasCode(err, wire.CodeAlreadyExists) { // created concurrently
			return s.Open(ctx, name)
		}
	}
	return v, err
}

// Names lists the vaults in the store, sorted.
func (s *Store) Names() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.Dir, "vaults"))
	if errors.Is(err, os.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "list vaults: %w", err)
	}
	names := []string{}
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), fileExt)
		if ok && !e.IsDir() && ValidName(n) == nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// Current returns the name of the current vault (DefaultName when none was chosen).
func (s *Store) Current() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "current"))
	if err != nil {
		return DefaultName
	}
	name := strings.TrimSpace(string(b))
	if ValidName(name) != nil {
		return DefaultName
	}
	return name
}

// Use makes name the current vault.
func (s *Store) Use(ctx context.Context, name string) error {
	v, err := s.Open(ctx, name)
	if err != nil {
		return err
	}
	v.Close()
	tmp := filepath.Join(s.Dir, ".current.tmp")
	if err := os.WriteFile(tmp, []byte(name+"\n"), 0o600); err != nil {
		return wire.Errorf(wire.CodeHostIO, "use vault: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.Dir, "current")); err != nil {
		return wire.Errorf(wire.CodeHostIO, "use vault: %w", err)
	}
	return nil
}

// Delete removes the vault called name: its file with the -wal and -shm
// files beside it, its registration in its parent when it is a fork, and
// the current-vault choice when it was current. It refuses with
//   - vault_not_found when there is no such vault;
//   - invalid_input when the vault's path is a symbolic link: Delete
//     removes only the store's own files, never a link or what it points to;
//   - vault_busy while another process holds the vault (a writer mount, a
//     run);
//   - vault_has_forks when live forks borrow its data, unless force,
//     which detaches them first; forks that never completed (killed while
//     being made) do not count: their pins are released and their
//     temporary files removed first (recoverForks);
//   - vault_unreadable (details: reason) when the file cannot be opened as
//     a vault (see Open), unless force, which removes it all the same and
//     releases the registrations of a fork by that name in the other
//     vaults (its file no longer says whose fork it was).
//
// It never removes anything but the vault's file, its -wal and -shm, its
// replica mark and the replicator's local state beside it (replica.go),
// and the store's current-vault file.
func (s *Store) Delete(ctx context.Context, name string, force bool) error {
	if err := ValidName(name); err != nil {
		return err
	}
	path := s.PathOf(name)
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return wire.Errorf(wire.CodeVaultNotFound, "delete vault: no vault %q", name).With("vault", name)
	}
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "delete vault %q: %w", name, err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return wire.Errorf(wire.CodeInvalidInput, "delete vault %q: %s is a symbolic link; avfs deletes only its own vault files, never a link or what it points to: remove the link yourself", name, path).
			With("vault", name).With("path", path)
	}
	v, _, err := s.inspect(ctx, name)
	var ue *wire.Error
	if errors.As(err, &ue) && ue.Code == wire.CodeVaultUnreadable {
		if !force {
			hint := "--force deletes it"
			if ue.Details["reason"] == wire.VaultSchemaTooNew {
				hint = "a newer avfs reads it; --force deletes it and its data all the same"
			}
			e := wire.Errorf(wire.CodeVaultUnreadable, "delete vault %q: %w; %s", name, ue, hint)
			for k, v := range ue.Details {
				e.With(k, v)
			}
			return e
		}
		return s.deleteUnreadable(ctx, name, path, fi, ue)
	}
	if err != nil {
		return err
	}
	// Nobody may be using it: a writer mount or a run would go on writing
	// to a file that is gone. The lock taken here keeps new ones out.
	if err := v.claimForDelete(ctx); err != nil {
		v.Close()
		return fmt.Errorf("delete vault %q: %w", name, err)
	}
	if _, err := v.recoverForks(ctx); err != nil {
		v.Unlock(ctx, LockMount)
		v.Close()
		return fmt.Errorf("delete vault %q: %w", name, err)
	}
	info, err := v.Info(ctx)
	if err != nil {
		v.Close()
		return err
	}
	if len(info.Forks) > 0 {
		if !force {
			v.Unlock(ctx, LockMount)
			v.Close()
			names := make([]string, len(info.Forks))
			for i, f := range info.Forks {
				names[i] = f.Name
			}
			return wire.Errorf(wire.CodeVaultHasForks, "delete vault %q: forks %s borrow its data; detach them or use --force", name, strings.Join(names, ", ")).
				With("vault", name).With("forks", names)
		}
		for _, f := range info.Forks {
			if err := s.Detach(ctx, f.Name); err != nil && !wire.HasCode(err, wire.CodeVaultNotFound) {
				v.Unlock(ctx, LockMount)
				v.Close()
				return fmt.Errorf("delete vault %q: %w", name, err)
			}
		}
	}
	v.Close()
	// A fork tells its parent that it no longer borrows.
	if info.Parent != nil {
		if err := s.unregisterFork(ctx, info.Parent.Name, info.UUID); err != nil && !wire.HasCode(err, wire.CodeVaultNotFound) {
			return fmt.Errorf("delete vault %q: %w", name, err)
		}
	}
	if err := removeFiles(s.PathOf(name)); err != nil {
		return wire.Errorf(wire.CodeHostIO, "delete vault %q: %w", name, err)
	}
	if s.Current() == name {
		os.Remove(filepath.Join(s.Dir, "current"))
	}
	return nil
}

// removeFiles removes a vault file with its WAL and shared-memory files,
// its replica mark and the replicator's local state (replica.go).
func removeFiles(path string) error {
	var errs []error
	for _, p := range []string{path, path + "-wal", path + "-shm", ReplicaMarkPath(path), ReplicatorLockPath(path)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(LitestreamDir(path)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
