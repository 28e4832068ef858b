package vault

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"avfs/wire"
)

// agedFile writes /f once per age given (oldest first) and dates each
// version that long ago; version n is "vN".
func agedFile(t *testing.T, v *Vault, ages ...time.Duration) {
	t.Helper()
	for i, age := range ages {
		write(t, v, "/f", fmt.Sprintf("v%d", i+1))
		if _, err := v.db.Exec("UPDATE versions SET time_ns = ? WHERE n = ?", time.Now().Add(-age).UnixNano(), i+1); err != nil {
			t.Fatal(err)
		}
	}
}

// versionsLeft returns the version numbers of /f.
func versionsLeft(t *testing.T, v *Vault) []int64 {
	t.Helper()
	log, err := v.Log(context.Background(), "/f")
	if err != nil {
		t.Fatal(err)
	}
	var ns []int64
	for _, ver := range log {
		ns = append(ns, ver.N)
	}
	return ns
}

const day = 24 * time.Hour

// TestPruneRules checks each rule of Prune: --keep, --older-than, both
// (a version goes only when both say so), the newest version always kept,
// versions holding a checkpoint's state never pruned, and a dry run that
// lists what the prune then removes and changes nothing.
func TestPruneRules(t *testing.T) {
	ctx := context.Background()
	ages := []time.Duration{10 * day, 8 * day, 5 * day, day, 0}
	for _, tc := range []struct {
		name string
		opts PruneOptions
		left []int64
	}{
		{"keep", PruneOptions{Keep: 2}, []int64{4, 5}},
		{"older-than", PruneOptions{OlderThan: 7 * day}, []int64{3, 4, 5}},
		{"older-than everything but the newest", PruneOptions{OlderThan: time.Hour}, []int64{5}},
		{"both: keep decides", PruneOptions{Keep: 4, OlderThan: 2 * day}, []int64{2, 3, 4, 5}},
		{"both: age decides", PruneOptions{Keep: 1, OlderThan: 7 * day}, []int64{3, 4, 5}},
		{"nothing old enough", PruneOptions{Keep: 1, OlderThan: 30 * day}, []int64{1, 2, 3, 4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, v := newVault(t)
			agedFile(t, v, ages...)
			files, rows := vaultFiles(t, v), tableCounts(t, v)
			dryOpts := tc.opts
			dryOpts.DryRun = true
			dry, err := v.Prune(ctx, dryOpts)
			if err != nil {
				t.Fatal(err)
			}
			if got := vaultFiles(t, v); string(got[0]) != string(files[0]) || string(got[1]) != string(files[1]) || !mapsEqual(tableCounts(t, v), rows) {
				t.Fatal("the dry run changed the vault")
			}
			res, err := v.Prune(ctx, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := versionsLeft(t, v); !slices.Equal(got, tc.left) {
				t.Errorf("versions left %v, want %v", got, tc.left)
			}
			gone := int64(len(ages) - len(tc.left))
			if res.Versions != gone || dry.Versions != gone || dry.Bytes != res.Bytes || res.Bytes != 2*gone || int64(len(dry.Removed)) != gone {
				t.Errorf("dry run %+v, prune %+v, want %d versions gone", dry, res, gone)
			}
			for i, p := range dry.Removed {
				if p.Path != "/f" || p.Version != int64(i+1) || p.Size != 2 || p.Op == "" {
					t.Errorf("dry run lists %+v", p)
				}
			}
			if !slices.Equal(res.Removed, dry.Removed) {
				t.Errorf("prune removed %v, the dry run listed %v", res.Removed, dry.Removed)
			}
			mustCheck(t, v)
		})
	}
	t.Run("invalid", func(t *testing.T) {
		_, v := newVault(t)
		for _, o := range []PruneOptions{{}, {DryRun: true}, {Keep: -1}, {OlderThan: -time.Hour}, {Keep: 2, OlderThan: -time.Hour}} {
			if _, err := v.Prune(ctx, o); !wire.HasCode(err, wire.CodeInvalidInput) {
				t.Errorf("prune %+v: %v", o, err)
			}
		}
	})
}

// TestPruneKeepsCheckpointedVersions checks that a version holding a
// file's state at a checkpoint survives any prune, and that the
// checkpoint still restores after prune and gc.
func TestPruneKeepsCheckpointedVersions(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/f", "v1")
	write(t, v, "/f", "v2")
	if _, err := v.SaveCheckpoint(ctx, "cp", ""); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/f", "v3")
	write(t, v, "/f", "v4")
	write(t, v, "/g", "g1") // created after the checkpoint: no protection
	write(t, v, "/g", "g2")
	for _, dry := range []bool{true, false} {
		res, err := v.Prune(ctx, PruneOptions{Keep: 1, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		if res.Versions != 3 {
			t.Errorf("dry run %v: removed %d versions, want 3 (f's 1 and 3, g's 1)", dry, res.Versions)
		}
	}
	if got := versionsLeft(t, v); !slices.Equal(got, []int64{2, 4}) {
		t.Errorf("versions left %v, want [2 4] (2 is the checkpoint's)", got)
	}
	if _, err := v.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.RestoreCheckpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, v, "/f"); got != "v2" {
		t.Errorf("restored /f is %q", got)
	}
	mustCheck(t, v)
}
