package vault

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"

	"avfs/wire"
)

// RestoreTemp returns a new path in the store's vaults directory, beside
// where the vault called name lives, for a restore to write a vault file
// into before AdoptRestored moves it into place. Nothing exists there yet;
// the caller removes what it wrote when it does not adopt it.
func (s *Store) RestoreTemp(name string) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	if err := s.ensureDir(); err != nil {
		return "", err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("%s.restoring-%x", s.PathOf(name), rnd), nil
}

// RemoveTemp removes a file RestoreTemp named, with its log, index and
// replica state.
func RemoveTemp(path string) error { return removeFiles(path) }

// AdoptRestored makes the vault file at tmp (from RestoreTemp, written
// whole and closed) the vault called name: it opens it as a vault (a file
// that is not one fails with vault_unreadable), records name as its name
// when it had another, folds its log into the file, and links it into
// place. A vault called name already there is refused with
// already_exists, unless replace, which deletes it first (Delete's
// refusals apply: vault_busy while it is in use, vault_has_forks). The
// restored vault is not replicated (it carries no replica mark). Its
// content, history and audit log are the file's, as they were; the name
// change is not audited (the audit log's rows are the original's, MACs
// included). tmp is left for the caller to remove on failure.
func (s *Store) AdoptRestored(ctx context.Context, name, tmp string, replace bool) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, err
	}
	v, err := Open(ctx, tmp, s.Opts)
	if err != nil {
		return Info{}, err
	}
	if _, err := v.db.ExecContext(ctx, "UPDATE state SET name = ? WHERE id = 1 AND name <> ?", name, name); err != nil {
		v.Close()
		return Info{}, storageErr("restore vault", err)
	}
	if err := v.Close(); err != nil { // not marked: the last close folds the log into the file
		return Info{}, err
	}
	path := s.PathOf(name)
	if _, err := os.Lstat(path); err == nil {
		if !replace {
			return Info{}, wire.Errorf(wire.CodeAlreadyExists, "restore vault %q: a vault by that name exists; restore under another name, or --force to replace it", name).With("vault", name)
		}
		if err := s.Delete(ctx, name, false); err != nil {
			return Info{}, fmt.Errorf("restore vault %q over the existing one: %w", name, err)
		}
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return Info{}, wire.Errorf(wire.CodeAlreadyExists, "restore vault %q: a vault by that name was created meanwhile", name).With("vault", name)
		}
		return Info{}, wire.Errorf(wire.CodeHostIO, "restore vault %q: %w", name, err)
	}
	removeFiles(tmp)
	v, err = s.Open(ctx, name)
	if err != nil {
		return Info{}, err
	}
	defer v.Close()
	return v.Info(ctx)
}
