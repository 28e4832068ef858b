package vault

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"avfs/wire"
)

func i64p(n int64) *int64 { return &n }

// setRetention sets every setting of v's retention.
func setRetention(t *testing.T, v *Vault, r Retention) {
	t.Helper()
	if _, err := v.SetRetention(context.Background(), RetentionChange{Versions: &r.Versions, MaxAgeS: &r.MaxAgeS, HistoryPct: &r.HistoryPct, HistoryMinMB: &r.HistoryMinMB}); err != nil {
		t.Fatal(err)
	}
}

func writeBytes(t *testing.T, v *Vault, p string, b []byte) {
	t.Helper()
	if _, err := v.WriteFile(context.Background(), p, bytes.NewReader(b), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func logOf(t *testing.T, v *Vault, p string) []Version {
	t.Helper()
	vs, err := v.Log(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func storedBytes(t *testing.T, v *Vault) int64 {
	t.Helper()
	st, err := v.RetentionStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.StoredBytes
}

func TestRetentionDefaultsAndSettings(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	st, err := v.RetentionStatus(ctx)
	if err != nil || st.Retention != DefaultRetention() {
		t.Fatalf("a new vault's retention %+v %v, want %+v", st.Retention, err, DefaultRetention())
	}
	r, err := v.SetRetention(ctx, RetentionChange{Versions: i64p(5)})
	if err != nil || r.Versions != 5 || r.MaxAgeS != DefaultRetention().MaxAgeS {
		t.Fatalf("%+v %v", r, err)
	}
	for _, c := range []RetentionChange{{Versions: i64p(-1)}, {MaxAgeS: i64p(-5)}, {HistoryPct: i64p(10001)}, {HistoryMinMB: i64p(-1)}} {
		if _, err := v.SetRetention(ctx, c); !wire.HasCode(err, wire.CodeInvalidInput) {
			t.Errorf("%+v: %v, want invalid_input", c, err)
		}
	}
}

// TestRetentionVersions keeps the newest N versions of a live file, and
// the chunks only the removed versions held are freed in the same pass.
func TestRetentionVersions(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	setRetention(t, v, Retention{Versions: 3})
	for i := range 10 {
		writeBytes(t, v, "/f", randBytes(ChunkSize+i))
	}
	before := storedBytes(t, v)
	res, err := v.Retain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vs := logOf(t, v, "/f")
	if len(vs) != 3 || vs[len(vs)-1].N != 10 || res.Versions != 7 {
		t.Fatalf("kept %d versions (newest %d), removed %d; want the newest 3 of 10", len(vs), vs[len(vs)-1].N, res.Versions)
	}
	if res.Chunks != 13 || storedBytes(t, v) != before-res.BytesFreed || res.BytesFreed < 7*ChunkSize {
		t.Fatalf("freed %+v, stored %d → %d", res, before, storedBytes(t, v))
	}
	mustCheck(t, v)
	// The kept versions still read back.
	if _, err := v.Revert(ctx, "/f", vs[0].N); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, v)
}

// TestRetentionAge removes versions older than MaxAgeS, the whole history
// of a file deleted that long ago, but never a live file's current state.
func TestRetentionAge(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	setRetention(t, v, Retention{MaxAgeS: 3600})
	writeBytes(t, v, "/live", []byte("one"))
	writeBytes(t, v, "/live", []byte("two"))
	writeBytes(t, v, "/gone", []byte("bye"))
	if _, err := v.Remove(ctx, "/gone", false); err != nil {
		t.Fatal(err)
	}
	writeBytes(t, v, "/young", []byte("y"))
	writeBytes(t, v, "/young", []byte("yy"))
	// Age everything but /young by two hours.
	sqliteExec(t, v.Path(), fmt.Sprintf("UPDATE versions SET time_ns = time_ns - %d WHERE path != '/young'", int64(2*time.Hour)))
	res, err := v.Retain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := logOf(t, v, "/live"); len(got) != 1 || got[0].N != 2 {
		t.Errorf("/live kept %+v, want its current version only", got)
	}
	if _, err := v.Log(ctx, "/gone"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Errorf("/gone, deleted two hours ago, still has history (%v)", err)
	}
	if got := logOf(t, v, "/young"); len(got) != 2 {
		t.Errorf("/young kept %d versions, want 2", len(got))
	}
	if res.Versions != 3 {
		t.Errorf("removed %d versions, want 3", res.Versions)
	}
	if read(t, v, "/live") != "two" {
		t.Error("the live content changed")
	}
	mustCheck(t, v)
}

// TestRetentionBudget writes and deletes a tree again and again: the byte
// budget removes the oldest deleted files' history first, keeps the
// newest within the budget, and the stored bytes stay within live data +
// budget.
func TestRetentionBudget(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	setRetention(t, v, Retention{HistoryPct: 50, HistoryMinMB: 1})
	writeBytes(t, v, "/live.bin", randBytes(4<<20)) // budget: 2 MiB
	for round := range 5 {
		if _, err := v.Mkdir(ctx, "/tree", 0o755, true); err != nil {
			t.Fatal(err)
		}
		for i := range 16 {
			writeBytes(t, v, fmt.Sprintf("/tree/r%d-%d", round, i), randBytes(128<<10))
		}
		if _, err := v.Remove(ctx, "/tree", true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Retain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, limit := storedBytes(t, v), int64(4<<20+2<<20); got > limit {
		t.Errorf("stored %d bytes after the pass, want at most live + budget = %d", got, limit)
	}
	// The newest round's files are still in history, the oldest not.
	if got := logOf(t, v, "/tree/r4-15"); len(got) == 0 {
		t.Error("the newest deleted file lost its history")
	}
	if _, err := v.Log(ctx, "/tree/r0-0"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Errorf("the oldest deleted file kept its history (%v)", err)
	}
	mustCheck(t, v)
}

// TestRetentionKeepsCheckpointsAndHolds: a version holding a checkpoint's
// state and the newest version of a deleted file still read through a
// Hold survive every rule.
func TestRetentionKeepsCheckpointsAndHolds(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	setRetention(t, v, Retention{Versions: 1, HistoryPct: 1, HistoryMinMB: 0})
	first := randBytes(2 * ChunkSize)
	writeBytes(t, v, "/f", first)
	if _, err := v.SaveCheckpoint(ctx, "cp", ""); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		writeBytes(t, v, "/f", randBytes(2*ChunkSize))
	}
	writeBytes(t, v, "/held", randBytes(ChunkSize))
	a, err := v.Stat(ctx, "/held")
	if err != nil {
		t.Fatal(err)
	}
	release := v.Hold(a.Ino)
	if _, err := v.Remove(ctx, "/held", false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.GC(ctx); err != nil {
		t.Fatal(err)
	}
	vs := logOf(t, v, "/f")
	if len(vs) != 2 || vs[0].N != 1 {
		t.Fatalf("kept %+v, want the checkpoint's version 1 and the current one", vs)
	}
	if got := logOf(t, v, "/held"); len(got) != 1 {
		t.Fatalf("the held file kept %d versions, want its newest", len(got))
	}
	release()
	release() // idempotent
	if _, err := v.Retain(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Log(ctx, "/held"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Errorf("released: the deleted file kept its history (%v)", err)
	}
	if _, err := v.RestoreCheckpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, v, "/f"); got != string(first) {
		t.Error("the checkpoint's content did not survive retention")
	}
	mustCheck(t, v)
}

// TestRetentionOff keeps everything when every rule is off.
func TestRetentionOff(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	setRetention(t, v, Retention{})
	for range 40 {
		writeBytes(t, v, "/f", randBytes(100))
	}
	res, err := v.Retain(ctx)
	if err != nil || res.Versions != 0 || len(logOf(t, v, "/f")) != 40 {
		t.Fatalf("%+v %v, %d versions", res, err, len(logOf(t, v, "/f")))
	}
}

// TestRetentionInBackground: a Vault that StartRetention'd runs a pass by
// itself once writes have grown the stored bytes by the slack, and Close
// stops it.
func TestRetentionInBackground(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	setRetention(t, v, Retention{Versions: 2})
	v.StartRetention()
	v.StartRetention() // a no-op
	// 8 MiB of slack: 320 writes of a new 64 KiB chunk cross it twice.
	for range 320 {
		writeBytes(t, v, "/f", randBytes(ChunkSize))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		passes, err := v.RetentionError()
		if err != nil {
			t.Fatal(err)
		}
		if passes > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no background pass ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := v.RetainIfDue(ctx); err != nil { // waits for a pass under way
		t.Fatal(err)
	}
	// What is left is the newest versions, and what was written since the
	// last pass: less than the slack.
	if n := len(logOf(t, v, "/f")); n > 2+128 {
		t.Errorf("%d versions after the background passes", n)
	}
	if got := storedBytes(t, v); got > 8<<20+2*ChunkSize {
		t.Errorf("stored %d bytes after writing 20 MiB, want at most the slack (8 MiB) and the kept versions", got)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCloseRunsLastPassOnlyAfterChanges: a Vault that StartRetention'd
// (a mount's) runs a last pass when it closes if something was changed
// since it started or since its last pass, and skips it when the only
// writes were its own lock and unlock (an idle mount's unmount).
func TestCloseRunsLastPassOnlyAfterChanges(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		during   func(t *testing.T, v *Vault)
		versions int // of /f once closed
	}{
		{"idle", func(t *testing.T, v *Vault) {}, 2},
		{"lock and unlock only", func(t *testing.T, v *Vault) {
			if err := v.Lock(ctx, LockMount, "test"); err != nil {
				t.Fatal(err)
			}
			if err := v.Unlock(ctx, LockMount); err != nil {
				t.Fatal(err)
			}
		}, 2},
		{"a write", func(t *testing.T, v *Vault) { writeBytes(t, v, "/f", randBytes(100)) }, 1},
		{"a write, then a pass", func(t *testing.T, v *Vault) {
			writeBytes(t, v, "/f", randBytes(100))
			if _, err := v.Retain(ctx); err != nil {
				t.Fatal(err)
			}
			writeBytes(t, v, "/f", randBytes(100)) // two versions left for Close
			if err := v.Lock(ctx, LockMount, "test"); err != nil {
				t.Fatal(err)
			}
			if err := v.Unlock(ctx, LockMount); err != nil {
				t.Fatal(err)
			}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, v := newVault(t)
			// One version kept, and a byte budget no test write reaches,
			// so that only the rules on versions decide and no pass is
			// due by bytes.
			setRetention(t, v, Retention{Versions: 1, HistoryMinMB: 1024})
			if _, err := v.Retain(ctx); err != nil { // the pass the new settings asked for
				t.Fatal(err)
			}
			writeBytes(t, v, "/f", randBytes(100))
			writeBytes(t, v, "/f", randBytes(100))
			v.Close()
			v, err := s.Open(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			v.StartRetention()
			tc.during(t, v)
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			v, err = s.Open(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if n := len(logOf(t, v, "/f")); n != tc.versions {
				t.Errorf("/f has %d versions after Close, want %d", n, tc.versions)
			}
			mustCheck(t, v)
		})
	}
}

// TestMigrateToRetention opens a vault of schema version 2: the stored
// bytes are counted and the default settings apply.
func TestMigrateToRetention(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t)
	writeBytes(t, v, "/a", randBytes(3*ChunkSize))
	v.Close()
	schemaV2(t, s.PathOf("t"))
	v, err := s.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	st, err := v.RetentionStatus(ctx)
	if err != nil || st.Retention != DefaultRetention() || st.StoredBytes != 3*ChunkSize {
		t.Fatalf("%+v %v", st, err)
	}
	mustCheck(t, v)
}

func autoVacuum(t *testing.T, v *Vault) int {
	t.Helper()
	var av int
	if err := v.rdb.QueryRow("PRAGMA auto_vacuum").Scan(&av); err != nil {
		t.Fatal(err)
	}
	return av
}

func fileSize(t *testing.T, v *Vault) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{v.Path(), v.Path() + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestCompactAfterRetention: once retention removed a deleted tree's
// history, the end of a run gives the freed pages back to the file system.
func TestCompactAfterRetention(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	if av := autoVacuum(t, v); av != 2 {
		t.Fatalf("a new vault has auto_vacuum %d, want 2 (incremental)", av)
	}
	setRetention(t, v, Retention{HistoryPct: 1, HistoryMinMB: 1})
	writeBytes(t, v, "/keep", randBytes(1<<20))
	if _, err := v.Mkdir(ctx, "/tree", 0o755, true); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		writeBytes(t, v, fmt.Sprintf("/tree/%d", i), randBytes(1<<20))
	}
	if _, err := v.Remove(ctx, "/tree", true); err != nil {
		t.Fatal(err)
	}
	if _, err := v.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, v)
	if _, ran, err := v.RetainIfDue(ctx); err != nil || !ran {
		t.Fatalf("ran %v %v", ran, err)
	}
	if _, err := v.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	// The end of a run gives back at most runCompactPages.
	after := fileSize(t, v)
	if given := before - after; given < runCompactPages*4096-(1<<20) || given > runCompactPages*4096+(1<<20) {
		t.Errorf("the end of the run gave back %d bytes (%d → %d), want about %d", given, before, after, runCompactPages*4096)
	}
	// An unmount (or the next runs) gives back the rest.
	if _, err := v.compactIfSparse(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := v.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	if after := fileSize(t, v); after > 8<<20 {
		t.Errorf("the file is %d bytes after retention and compaction (was %d), want under 8 MiB", after, before)
	}
	mustCheck(t, v)
}

// TestGCConvertsToIncrementalVacuum: a vault made before vaults could
// shrink gets auto_vacuum=INCREMENTAL from gc's VACUUM.
func TestGCConvertsToIncrementalVacuum(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t)
	v.Close()
	sqliteExec(t, s.PathOf("t"), "PRAGMA auto_vacuum = 0", "VACUUM")
	v, err := s.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if av := autoVacuum(t, v); av != 0 {
		t.Fatalf("auto_vacuum %d before gc", av)
	}
	if _, err := v.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if av := autoVacuum(t, v); av != 2 {
		t.Fatalf("auto_vacuum %d after gc, want 2", av)
	}
}

// TestForkKeepsRetention: a fork starts with its parent's retention
// settings, and can give freed pages back like any vault.
func TestForkKeepsRetention(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t)
	want := Retention{Versions: 4, MaxAgeS: 3600, HistoryPct: 20, HistoryMinMB: 2}
	setRetention(t, v, want)
	writeBytes(t, v, "/a", []byte("a"))
	f, err := s.Fork(ctx, "t", "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.RetentionStatus(ctx)
	if err != nil || st.Retention != want {
		t.Fatalf("the fork's retention %+v %v, want %+v", st.Retention, err, want)
	}
	if av := autoVacuum(t, f); av != 2 {
		t.Errorf("the fork has auto_vacuum %d, want 2", av)
	}
	mustCheck(t, f)
}
