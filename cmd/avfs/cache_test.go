package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"avfs/wire"
)

// TestCache: a sandboxed run's ~/.cache is the vault's cache: kept
// between runs, outside the vault, shown and cleared by avfs cache.
func TestCache(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	a.write("mkdir -p \"$XDG_CACHE_HOME/pip\" && echo wheel > ~/.cache/pip/w && echo kept\n", "/fill.sh")
	r := a.proxy(nil, "sh", "fill.sh")
	r.ok(t, wire.AllowWithCheckpoint)
	if r.env.Sandbox == nil || r.env.Sandbox.Mode != wire.SandboxNamespaces {
		t.Fatalf("not sandboxed: %s", r.raw)
	}
	for _, c := range r.env.Changes {
		if strings.Contains(c.Path, ".cache") || strings.Contains(c.Path, "wheel") {
			t.Fatalf("the cache landed in the vault: %v", r.env.Changes)
		}
	}
	dir := filepath.Join(a.home, "cache", "default")
	if b, err := os.ReadFile(filepath.Join(dir, "pip", "w")); err != nil || string(b) != "wheel\n" {
		t.Fatalf("cache file: %q %v", b, err)
	}
	// The next run finds it.
	a.write("cat ~/.cache/pip/w\n", "/read.sh")
	r = a.proxy(nil, "sh", "read.sh")
	r.ok(t, wire.AllowWithCheckpoint)
	equal(t, "cached", r.stdout(t), "wheel\n")

	var rep wire.CacheReport
	a.into(&rep, "cache", "show")
	if rep.Dir != dir || len(rep.Entries) != 1 || rep.Entries[0].Name != "pip" || rep.Bytes != 6 || rep.Cleared {
		t.Fatalf("show: %+v", rep)
	}
	a.into(&rep, "cache", "clear")
	if !rep.Cleared || len(rep.Entries) != 0 || rep.Bytes != 0 {
		t.Fatalf("clear: %+v", rep)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("after clear: %v %v", ents, err)
	}
	a.fail(1, string(wire.CodeInvalidInput), "--vault", "../x", "cache", "show")
}

// TestCacheCap: after a run, the cache is trimmed to sandbox.cache_size,
// the least recently changed tool cache first.
func TestCacheCap(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	os.WriteFile(filepath.Join(a.home, "config.json"), []byte(`{"sandbox": {"cache_size": "1KiB"}}`), 0o644)
	a.write("mkdir -p ~/.cache/old ~/.cache/new && head -c 800 /dev/zero > ~/.cache/old/f && touch -d '1 hour ago' ~/.cache/old/f ~/.cache/old && head -c 800 /dev/zero > ~/.cache/new/f\n", "/fill.sh")
	a.proxy(nil, "sh", "fill.sh").ok(t, wire.AllowWithCheckpoint)
	var rep wire.CacheReport
	a.into(&rep, "cache", "show")
	if len(rep.Entries) != 1 || rep.Entries[0].Name != "new" || rep.MaxBytes != 1024 {
		t.Fatalf("trimmed cache: %+v", rep)
	}
}
