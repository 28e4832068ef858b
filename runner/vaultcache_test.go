package runner

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"avfs/vault"
	"avfs/wire"
)

func uuidOf(t *testing.T, v *vault.Vault) string {
	t.Helper()
	info, err := v.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.UUID
}

// TestVaultCacheKeepsOpen: a vault released is the one the next run gets,
// until a run gives it back unfit (keep false).
func TestVaultCacheKeepsOpen(t *testing.T) {
	ctx := context.Background()
	store := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"})
	c := NewVaultCache(0, 0)
	defer c.Close()
	v1, release1, err := c.Open(ctx, store, vault.DefaultName, true)
	if err != nil {
		t.Fatal(err)
	}
	release1(true)
	release1(true) // a second release is a no-op
	v2, release2, err := c.Open(ctx, store, vault.DefaultName, true)
	if err != nil {
		t.Fatal(err)
	}
	if v2 != v1 || c.Len() != 1 {
		t.Fatalf("the second open did not reuse the vault (len %d)", c.Len())
	}
	release2(false)
	if c.Len() != 0 {
		t.Fatalf("a vault given back unfit stayed cached")
	}
	if _, err := v1.Info(ctx); err == nil {
		t.Fatalf("a vault given back unfit was not closed")
	}
	v3, release3, err := c.Open(ctx, store, vault.DefaultName, true)
	if err != nil {
		t.Fatal(err)
	}
	defer release3(true)
	if v3 == v1 {
		t.Fatalf("a dropped vault was handed out again")
	}
}

// TestVaultCacheFileChanged: a vault deleted, created again or replaced
// since it was cached is never what a run gets: the file at the path now
// is.
func TestVaultCacheFileChanged(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, store *vault.Store)
		create bool
		want   wire.Code // "" when the open succeeds on the new file
	}{
		{"deleted", func(t *testing.T, store *vault.Store) {
			if err := store.Delete(ctx, "a", false); err != nil {
				t.Fatal(err)
			}
		}, false, wire.CodeVaultNotFound},
		{"created again", func(t *testing.T, store *vault.Store) {
			if err := store.Delete(ctx, "a", false); err != nil {
				t.Fatal(err)
			}
			v, err := store.Create(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			v.Close()
		}, false, ""},
		{"renamed over", func(t *testing.T, store *vault.Store) {
			v, err := store.Create(ctx, "b")
			if err != nil {
				t.Fatal(err)
			}
			v.Close()
			if err := os.Rename(store.PathOf("b"), store.PathOf("a")); err != nil {
				t.Fatal(err)
			}
		}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"})
			v, err := store.Create(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			v.Close()
			c := NewVaultCache(0, 0)
			defer c.Close()
			old, release, err := c.Open(ctx, store, "a", tc.create)
			if err != nil {
				t.Fatal(err)
			}
			oldUUID := uuidOf(t, old)
			release(true)
			tc.change(t, store)
			got, release, err := c.Open(ctx, store, "a", tc.create)
			if tc.want != "" {
				if !wire.HasCode(err, tc.want) {
					t.Fatalf("open after the change: %v, want %s", err, tc.want)
				}
				if c.Len() != 0 {
					t.Fatalf("the vault of a missing file stayed cached")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer release(true)
			if got == old || uuidOf(t, got) == oldUUID {
				t.Fatalf("the cached vault of the old file was handed out")
			}
			if _, err := old.Info(ctx); err == nil {
				t.Fatalf("the vault of the old file was not closed")
			}
		})
	}
}

// TestVaultCacheInUse: a vault whose file changed while a run uses it is
// closed when that run lets go, not before; Close waits the same way.
func TestVaultCacheInUse(t *testing.T) {
	ctx := context.Background()
	store := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"})
	c := NewVaultCache(0, 0)
	old, releaseOld, err := c.Open(ctx, store, vault.DefaultName, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(store.PathOf(vault.DefaultName), store.PathOf(vault.DefaultName)+".moved"); err != nil {
		t.Fatal(err)
	}
	fresh, releaseFresh, err := c.Open(ctx, store, vault.DefaultName, true) // created again
	if err != nil {
		t.Fatal(err)
	}
	if fresh == old {
		t.Fatalf("the moved vault was handed out")
	}
	if _, err := old.Info(ctx); err != nil {
		t.Fatalf("the moved vault was closed under its run: %v", err)
	}
	releaseOld(true)
	if _, err := old.Info(ctx); err == nil {
		t.Fatalf("the moved vault was not closed by its last release")
	}
	c.Close()
	if _, err := fresh.Info(ctx); err != nil {
		t.Fatalf("Close closed a vault in use: %v", err)
	}
	releaseFresh(true)
	if _, err := fresh.Info(ctx); err == nil {
		t.Fatalf("a vault in use at Close was not closed by its release")
	}
	v, release, err := c.Open(ctx, store, vault.DefaultName, true)
	if err != nil {
		t.Fatal(err)
	}
	release(true)
	if _, err := v.Info(ctx); err == nil || c.Len() != 0 {
		t.Fatalf("a closed cache kept a vault open")
	}
}

// TestVaultCacheBounds: no more than max unused vaults stay open, and
// those idle long enough are closed.
func TestVaultCacheBounds(t *testing.T) {
	ctx := context.Background()
	store := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"})
	for _, n := range []string{"a", "b", "c"} {
		v, err := store.Create(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		v.Close()
	}
	c := NewVaultCache(2, time.Hour)
	defer c.Close()
	var first *vault.Vault
	for i, n := range []string{"a", "b", "c"} {
		v, release, err := c.Open(ctx, store, n, false)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = v
		}
		release(true)
	}
	if c.Len() != 2 {
		t.Fatalf("%d vaults cached, want 2", c.Len())
	}
	if _, err := first.Info(ctx); err == nil {
		t.Fatalf("the least recently used vault was not closed")
	}

	idle := NewVaultCache(0, 20*time.Millisecond)
	defer idle.Close()
	v, release, err := idle.Open(ctx, store, "a", false)
	if err != nil {
		t.Fatal(err)
	}
	release(true)
	for deadline := time.Now().Add(10 * time.Second); idle.Len() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("an idle vault stayed open")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := v.Info(ctx); err == nil {
		t.Fatalf("the idle vault was dropped but not closed")
	}
}

// TestVaultCacheConcurrent: runs opening and letting go of the same vaults
// at once (go test -race).
func TestVaultCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	store := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"})
	v, err := store.Create(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	c := NewVaultCache(1, 0)
	defer c.Close()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := []string{vault.DefaultName, "other"}[i%2]
			for range 20 {
				v, release, err := c.Open(ctx, store, name, true)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := v.Info(ctx); err != nil {
					t.Error(err)
				}
				release(i%5 != 0)
			}
		})
	}
	wg.Wait()
}

// TestNilVaultCache: without a cache each open is the run's own.
func TestNilVaultCache(t *testing.T) {
	ctx := context.Background()
	store := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"})
	var c *VaultCache
	v, release, err := c.Open(ctx, store, vault.DefaultName, true)
	if err != nil {
		t.Fatal(err)
	}
	release(true)
	if _, err := v.Info(ctx); err == nil {
		t.Fatalf("an uncached vault stayed open")
	}
}
