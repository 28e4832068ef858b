package vault

import (
	"context"
	"strings"
	"testing"
)

// TestStats: live entries, deduplicated bytes, what only the past refers
// to, and what gc would remove, counted from the vault's own state.
func TestStats(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	big := strings.Repeat("a", ChunkSize) // one chunk
	write(t, v, "/a", big)
	write(t, v, "/b", big) // the same chunk again
	write(t, v, "/c", "small\n")
	if _, err := v.Mkdir(ctx, "/d", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.SaveCheckpoint(ctx, "one", ""); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/c", "changed\n") // the old content is kept for the checkpoint and the history
	st, err := v.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Vault != "t" || st.Live.Files != 3 || st.Live.Dirs != 2 || st.Live.Bytes != int64(2*ChunkSize+8) {
		t.Fatalf("live %+v", st.Live)
	}
	if st.Live.UniqueBytes != int64(ChunkSize+8) {
		t.Errorf("unique %d, want %d", st.Live.UniqueBytes, ChunkSize+8)
	}
	if st.History.OnlyBytes != 6 || st.History.Checkpoints != 1 || st.History.Versions < 4 || st.History.AuditRows == 0 {
		t.Errorf("history %+v", st.History)
	}
	if st.Storage.Chunks != 3 || st.Storage.ChunkBytes != int64(ChunkSize+8+6) || st.Storage.Unreferenced != 0 || st.Storage.FileSize == 0 ||
		st.Storage.LiveRows == 0 || st.Storage.Rows <= st.Storage.LiveRows {
		t.Errorf("storage %+v", st.Storage)
	}
	// Without the checkpoint and the history, the old content is
	// referenced by nothing: gc's to remove.
	if _, err := v.DeleteCheckpoint(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Prune(ctx, PruneOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	if st, err = v.Stats(ctx); err != nil || st.History.OnlyBytes != 0 || st.Storage.Unreferenced != 1 {
		t.Fatalf("after prune: %+v %v", st, err)
	}
	if _, err := v.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err = v.Stats(ctx); err != nil || st.Storage.Unreferenced != 0 || st.Storage.Chunks != 2 {
		t.Fatalf("after gc: %+v %v", st, err)
	}
}
