package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"avfs/wire"
)

// A vault's tool cache is a host directory ($AVFS_HOME/cache/VAULT) bound
// read-write at ~/.cache in its runs' sandboxes: Go's build and module
// caches, npm's, pip's stay between runs without landing in the host's
// home or in the vault's history and checkpoints. The command can write
// anything there, so avfs trusts nothing in it: it only measures and
// removes, never follows a symlink, and never reads what a file says.

// OpenCache makes the cache directory dir (mode 0700) if it is missing
// and checks it: a real directory owned by this user. It returns dir.
func OpenCache(dir string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", wire.Errorf(wire.CodeHostIO, "sandbox: cache: %v", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", wire.Errorf(wire.CodeHostIO, "sandbox: cache: %v", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", wire.Errorf(wire.CodeHostIO, "sandbox: cache: %v", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return "", wire.Errorf(wire.CodeHostIO, "sandbox: cache %s is not a directory of this user's", dir).With("path", dir)
	}
	return dir, nil
}

// CacheEntry is one top-level entry of a cache (go-build, npm, pip …).
type CacheEntry struct {
	Name  string
	Bytes int64 // of its regular files
	MTime int64 // the newest change of a file or directory beneath it, Unix nanoseconds
}

// CacheEntries measures dir's top-level entries; a missing dir has none.
func CacheEntries(dir string) ([]CacheEntry, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "sandbox: cache: %v", err)
	}
	out := make([]CacheEntry, 0, len(ents))
	for _, e := range ents {
		ce := CacheEntry{Name: e.Name()}
		_ = filepath.WalkDir(filepath.Join(dir, e.Name()), func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := d.Info() // Lstat: a symlink is never followed
			if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
				return nil
			}
			if fi.Mode().IsRegular() {
				ce.Bytes += fi.Size()
			}
			ce.MTime = max(ce.MTime, fi.ModTime().UnixNano())
			return nil
		})
		out = append(out, ce)
	}
	return out, nil
}

// TrimEvery is how often a cache is measured, at most: measuring walks
// every file (tens of milliseconds for a Go build cache of 16,000 files),
// too much to pay on every run.
const TrimEvery = 10 * time.Minute

// TrimCacheDue trims dir (see TrimCache) unless it was trimmed less than
// TrimEvery ago. When it was is the time of a marker beside dir
// (dir.trimmed), out of the sandbox's reach; a trim, or the first run,
// sets it.
func TrimCacheDue(dir string, maxBytes int64, now time.Time) error {
	marker := dir + ".trimmed"
	if fi, err := os.Lstat(marker); err == nil && fi.Mode().IsRegular() && now.Sub(fi.ModTime()) < TrimEvery && !fi.ModTime().After(now) {
		return nil
	}
	if err := TrimCache(dir, maxBytes); err != nil {
		return err
	}
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "sandbox: cache: %v", err)
	}
	f.Close()
	if err := os.Chtimes(marker, now, now); err != nil {
		return wire.Errorf(wire.CodeHostIO, "sandbox: cache: %v", err)
	}
	return nil
}

// TrimCache clears the least recently changed top-level entries of dir
// until what is left takes at most maxBytes. A whole tool cache goes at
// once: a Go module cache with some files missing would be broken, one
// that is gone is filled again.
func TrimCache(dir string, maxBytes int64) error {
	ents, err := CacheEntries(dir)
	if err != nil {
		return err
	}
	var total int64
	for _, e := range ents {
		total += e.Bytes
	}
	slices.SortFunc(ents, func(a, b CacheEntry) int { return int(min(max(a.MTime-b.MTime, -1), 1)) })
	for _, e := range ents {
		if total <= maxBytes {
			break
		}
		if err := removeAll(filepath.Join(dir, e.Name)); err != nil {
			return err
		}
		total -= e.Bytes
	}
	return nil
}

// ClearCache removes everything in dir, keeping dir (the next run
// measures it again).
func ClearCache(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "sandbox: cache: %v", err)
	}
	for _, e := range ents {
		if err := removeAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if err := os.Remove(dir + ".trimmed"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return wire.Errorf(wire.CodeHostIO, "sandbox: cache: %v", err)
	}
	return nil
}

// removeAll removes p and what is beneath it, making read-only
// directories writable first (Go's module cache is read-only), without
// following symlinks.
func removeAll(p string) error {
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() { // a real directory: WalkDir does not follow links
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(p); err != nil {
		return wire.Errorf(wire.CodeHostIO, "sandbox: cache: %v", err)
	}
	return nil
}
