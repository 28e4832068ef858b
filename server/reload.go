package server

import (
	"context"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// reloadLoop looks at the watched files every poll and loads the policy
// again when they changed, until stop is closed. A negative poll never
// looks.
func (s *Server) reloadLoop(ctx context.Context, stop <-chan struct{}, poll time.Duration) {
	if poll < 0 {
		return
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.ReloadIfChanged(context.WithoutCancel(ctx))
		}
	}
}

// ReloadIfChanged loads the policy again when the watched files changed
// since the last load (their names, sizes, modes or modification times),
// and reports whether it did. A load that fails keeps the policy in use:
// its error is the status's last_reload_error (and /health?bundles fails)
// until a load succeeds; the same files are not tried again until they
// change.
func (s *Server) ReloadIfChanged(ctx context.Context) bool {
	s.mu.Lock()
	watch, old := s.watch, s.print
	s.mu.Unlock()
	if fingerprint(watch) == old {
		return false
	}
	r, newWatch, err := s.cfg.Load(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if newWatch != nil {
		s.watch = newWatch
	}
	s.print = fingerprint(s.watch)
	s.reloadAt = time.Now()
	if err == nil && r.Policy == nil && s.cfg.Managed == nil {
		err = fmt.Errorf("serve: the loader gave no policy")
	}
	if err != nil {
		s.reloadErr = err
		s.cfg.Log.Printf("reload failed, keeping the policy in use: %v", err)
		return true
	}
	if s.cfg.Managed != nil {
		r.Policy = s.cfg.Managed.Policy() // the latest, under s.mu as PolicyChanged
	}
	s.reloadErr = nil
	s.reloads.Add(1)
	r.Vaults, r.Sandboxes = s.vaults, s.sandboxes
	s.state.Store(&state{r: r, loadedAt: time.Now()})
	s.cfg.Log.Printf("policy reloaded: %s", bundleList(r.Policy.Bundles()))
	return true
}

// fingerprint sums the names, sizes, modes and modification times of the
// files at paths (directories walked; a missing path counts as missing).
func fingerprint(paths []string) string {
	h := fnv.New128a()
	for _, p := range paths {
		if p == "" {
			continue
		}
		_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(h, "%s\x00missing\x00", path)
				return nil
			}
			fi, err := os.Stat(path) // follows a symlinked bundle
			if err != nil {
				fmt.Fprintf(h, "%s\x00missing\x00", path)
				return nil
			}
			fmt.Fprintf(h, "%s\x00%d\x00%o\x00%d\x00", path, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
			return nil
		})
	}
	return string(h.Sum(nil))
}
