package main

import (
	"strings"
	"testing"

	"avfs/wire"
)

// stats counts the live files, the deduplicated bytes and the history,
// in text and as the vault_stats document.
func TestStats(t *testing.T) {
	a := newAVFS(t)
	a.write("same\n", "/a")
	a.write("same\n", "/b")
	a.ok("mkdir", "/d")
	var st wire.VaultStats
	a.into(&st, "stats")
	if st.Kind != wire.VaultStatsKind || st.Live.Files != 2 || st.Live.Dirs != 2 || st.Live.Bytes != 10 || st.Live.UniqueBytes != 5 || st.History.AuditRows == 0 {
		t.Fatalf("stats %+v", st)
	}
	r := a.exec(nil, "stats")
	if out := string(r.stdout); r.code != 0 || !strings.Contains(out, "live     2 files, 2 dirs") || !strings.Contains(out, "dedup 2.00") {
		t.Fatalf("text: %+v", r)
	}
}
