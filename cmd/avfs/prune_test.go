package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

// vaultSum is a digest of the default vault's file and WAL.
func vaultSum(t *testing.T, a *avfs) [32]byte {
	t.Helper()
	h := sha256.New()
	for _, p := range []string{"default.avfs", "default.avfs-wal"} {
		b, err := os.ReadFile(filepath.Join(a.home, "vaults", p))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		h.Write(b)
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// TestGCDryRun runs gc --dry-run, checks that the vault file is
// unchanged, and that gc then frees what it said.
func TestGCDryRun(t *testing.T) {
	a := newAVFS(t)
	a.write(strings.Repeat("a", 100000), "/big")
	a.write("small", "/big")
	a.ok("prune", "--keep", "1")
	before := vaultSum(t, a)
	var dry, res wire.GCResult
	a.into(&dry, "gc", "--dry-run")
	if vaultSum(t, a) != before {
		t.Fatal("gc --dry-run changed the vault file")
	}
	if !dry.DryRun || dry.Vault != "default" || dry.Chunks == 0 || dry.BytesFreed < 100000 || dry.FileAfter != dry.FileBefore {
		t.Fatalf("gc --dry-run: %+v", dry)
	}
	a.into(&res, "vault", "gc")
	if res.DryRun || res.Rows != dry.Rows || res.Chunks != dry.Chunks || res.BytesFreed != dry.BytesFreed || res.ForksReleased != dry.ForksReleased {
		t.Fatalf("gc --dry-run said %+v, gc freed %+v", dry, res)
	}
	r := a.exec(nil, "gc", "-n")
	if r.code != 0 || !strings.HasPrefix(string(r.stdout), "would remove 0 versions, 0 rows and 0 chunks") {
		t.Fatalf("gc -n after gc: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestPruneDryRunOlderThan checks prune's --older-than (days and Go
// durations, garbage refused), its combination with --keep, and that
// --dry-run lists what prune then removes and changes nothing.
func TestPruneDryRunOlderThan(t *testing.T) {
	a := newAVFS(t)
	for _, s := range []string{"v1", "v2", "v3", "v4"} {
		a.write(s, "/f")
	}
	db := openDB(t, filepath.Join(a.home, "vaults", "default.avfs"))
	for n, age := range map[int]time.Duration{1: 10 * 24 * time.Hour, 2: 8 * 24 * time.Hour, 3: 40 * time.Hour} {
		if _, err := db.Exec("UPDATE versions SET time_ns = ? WHERE n = ?", time.Now().Add(-age).UnixNano(), n); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for _, bad := range []string{"soon", "7", "d", "-3d", "0s", "1d2h", "1e400d"} {
		a.fail(2, "usage", "prune", "--older-than", bad)
	}
	a.fail(2, "usage", "prune", "--dry-run")
	a.fail(1, "invalid_input", "prune", "--keep", "0", "--older-than", "1d")

	// --keep 3 and --older-than 36h: only version 1 is both.
	before := vaultSum(t, a)
	var dry wire.PruneResult
	a.into(&dry, "prune", "--keep", "3", "--older-than", "36h", "--dry-run")
	if vaultSum(t, a) != before {
		t.Fatal("prune --dry-run changed the vault file")
	}
	if !dry.DryRun || dry.Removed != 1 || dry.Bytes != 2 || len(dry.Versions) != 1 || dry.Versions[0].Version != 1 ||
		dry.Versions[0].Path != "/f" || dry.Keep != 3 || dry.OlderThan != "36h" {
		t.Fatalf("prune --dry-run: %+v", dry)
	}
	var lg struct {
		Versions []struct {
			N int64 `json:"version"`
		} `json:"versions"`
	}
	a.into(&lg, "log", "/f")
	equal(t, "versions after the dry run", len(lg.Versions), 4)

	// --older-than 7d alone: versions 1 and 2.
	a.into(&dry, "prune", "--older-than", "7d", "-n")
	if dry.Removed != 2 || len(dry.Versions) != 2 {
		t.Fatalf("prune --older-than 7d -n: %+v", dry)
	}
	var res wire.PruneResult
	a.into(&res, "prune", "--older-than", "7d")
	if res.DryRun || res.Removed != 2 || res.Bytes != dry.Bytes || len(res.Versions) != 2 || res.Versions[1] != dry.Versions[1] {
		t.Fatalf("prune --older-than 7d said %+v after its dry run %+v", res, dry)
	}
	a.into(&lg, "log", "/f")
	if len(lg.Versions) != 2 || lg.Versions[0].N != 3 {
		t.Fatalf("versions after prune: %+v", lg.Versions)
	}
	// The newest version stays whatever its age.
	a.into(&res, "prune", "--older-than", "1m")
	a.into(&lg, "log", "/f")
	if res.Removed != 1 || len(lg.Versions) != 1 || lg.Versions[0].N != 4 {
		t.Fatalf("prune --older-than 1m: %+v, left %+v", res, lg.Versions)
	}
	r := a.exec(nil, "prune", "--keep", "1", "--dry-run")
	if r.code != 0 || !strings.Contains(string(r.stdout), "would remove 0 versions") {
		t.Fatalf("human dry run: %d %q", r.code, r.stdout)
	}
}
