package vault

import (
	"bytes"
	"context"
	"os"
	"testing"
)

// vaultFiles returns the bytes of the vault's file and its WAL.
func vaultFiles(t *testing.T, v *Vault) [2][]byte {
	t.Helper()
	var out [2][]byte
	for i, p := range []string{v.Path(), v.Path() + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// tableCounts returns the number of rows of the tables gc and prune touch.
func tableCounts(t *testing.T, v *Vault) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, tbl := range []string{"inodes", "dentries", "chunks", "versions", "forks", "audit", "checkpoints"} {
		var n int64
		if err := v.rdb.QueryRow("SELECT COUNT(*) FROM " + tbl).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[tbl] = n
	}
	return out
}

// TestGCDryRun checks that gc's dry run changes nothing (the vault file,
// its WAL and its rows are as they were) and that its counts are what gc
// then frees, with and without something to free.
func TestGCDryRun(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	dryThenGC := func(step string) GCResult {
		t.Helper()
		files, rows := vaultFiles(t, v), tableCounts(t, v)
		dry, err := v.GCDryRun(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := vaultFiles(t, v); !bytes.Equal(got[0], files[0]) || !bytes.Equal(got[1], files[1]) {
			t.Errorf("%s: the dry run changed the vault file or its WAL", step)
		}
		if got := tableCounts(t, v); !mapsEqual(got, rows) {
			t.Errorf("%s: the dry run changed rows: %v, was %v", step, got, rows)
		}
		if !dry.DryRun || dry.FileAfter != dry.FileBefore {
			t.Errorf("%s: dry run %+v", step, dry)
		}
		res, err := v.GC(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.DryRun || dry.Versions != res.Versions || dry.Rows != res.Rows || dry.Chunks != res.Chunks || dry.BytesFreed != res.BytesFreed ||
			dry.ForksReleased != res.ForksReleased || dry.FilesRemoved != res.FilesRemoved {
			t.Errorf("%s: dry run said %+v, gc freed %+v", step, dry, res)
		}
		if got := tableCounts(t, v); got["inodes"]+got["dentries"] != rows["inodes"]+rows["dentries"]-res.Rows || got["chunks"] != rows["chunks"]-res.Chunks {
			t.Errorf("%s: rows %v, were %v, gc said %+v", step, got, rows, res)
		}
		mustCheck(t, v)
		return res
	}
	if res := dryThenGC("empty vault"); res.Rows != 0 || res.Chunks != 0 {
		t.Errorf("gc of an empty vault freed %+v", res)
	}
	big := randBytes(3 * ChunkSize)
	if _, err := v.WriteFile(ctx, "/big.bin", bytes.NewReader(big), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.SaveCheckpoint(ctx, "one", ""); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/big.bin", "small")
	write(t, v, "/a", "a1")
	write(t, v, "/a", "a2")
	if _, err := v.Remove(ctx, "/a", false); err != nil {
		t.Fatal(err)
	}
	// The checkpoint and history keep everything.
	if res := dryThenGC("kept by a checkpoint"); res.Chunks != 0 {
		t.Errorf("gc freed chunks a checkpoint and history keep: %+v", res)
	}
	if _, err := v.DeleteCheckpoint(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Prune(ctx, PruneOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	if res := dryThenGC("after prune"); res.Chunks < 3 || res.BytesFreed < int64(len(big)) {
		t.Errorf("gc after prune freed %+v, want big.bin's chunks", res)
	}
	dryThenGC("again")
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
