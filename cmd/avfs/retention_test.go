package main

import (
	"fmt"
	"strings"
	"testing"

	"avfs/wire"
)

func TestRetentionCommand(t *testing.T) {
	a := newAVFS(t)
	a.write("x", "/f")
	var res wire.RetentionResult
	a.into(&res, "retention", "show")
	equal(t, "defaults", res.Retention, wire.VaultRetention{Versions: 32, MaxAgeS: 30 * 24 * 3600, HistoryPct: 50, HistoryMinMB: 16})

	a.into(&res, "retention", "set", "--versions", "3", "--max-age", "7d")
	equal(t, "set by flags", res.Retention, wire.VaultRetention{Versions: 3, MaxAgeS: 7 * 24 * 3600, HistoryPct: 50, HistoryMinMB: 16})
	a.into(&res, "retention", "set", "history_pct", "100", "max_age", "off")
	equal(t, "set by keys", res.Retention, wire.VaultRetention{Versions: 3, HistoryPct: 100, HistoryMinMB: 16})
	equal(t, "decision limits by default", res.Decisions, wire.DecisionRetention{Max: 10000, MaxAgeS: 30 * 24 * 3600})

	// The decisions the vault records for replay: two runs, then limits.
	a.exec(nil, "--json", "proxy", "exec", "--", "true")
	a.exec(nil, "--json", "proxy", "exec", "--", "ls")
	a.into(&res, "retention", "set", "--decisions", "1", "decisions_max_age", "7d")
	equal(t, "decision limits set, applied at once", res.Decisions, wire.DecisionRetention{Max: 1, MaxAgeS: 7 * 24 * 3600, Recorded: 1})
	equal(t, "history settings kept", res.Retention, wire.VaultRetention{Versions: 3, HistoryPct: 100, HistoryMinMB: 16})
	for _, bad := range [][]string{
		{"retention", "set"},
		{"retention", "set", "versions"},
		{"retention", "set", "colour", "red"},
		{"retention", "set", "--max-age", "soon"},
		{"retention", "set", "--versions", "-1"},
		{"retention", "set", "--history-pct", "20000"},
		{"retention", "set", "--decisions", "-1"},
		{"retention", "set", "--decisions-max-age", "later"},
	} {
		r := a.json(nil, bad...)
		if r.code == 0 || r.doc["error"] == nil {
			t.Errorf("%q: exit %d %s", bad, r.code, r.raw)
		}
	}
	a.into(&res, "retention", "off")
	equal(t, "off", res.Retention, wire.VaultRetention{})
	equal(t, "off leaves the decision limits", res.Decisions.Max, int64(1))
	if out := string(a.exec(nil, "retention", "show").stdout); !strings.Contains(out, "every version is kept") {
		t.Errorf("show when off: %q", out)
	}
	a.into(&res, "retention", "reset")
	equal(t, "reset", res.Retention, wire.VaultRetention{Versions: 32, MaxAgeS: 30 * 24 * 3600, HistoryPct: 50, HistoryMinMB: 16})
	equal(t, "reset decision limits", res.Decisions, wire.DecisionRetention{Max: 10000, MaxAgeS: 30 * 24 * 3600, Recorded: 1})
}

// TestGCAppliesRetention: gc removes the versions retention lets go, its
// dry run says so first, and the log keeps the newest.
func TestGCAppliesRetention(t *testing.T) {
	a := newAVFS(t)
	for i := range 6 {
		a.write(fmt.Sprintf("content %d", i), "/f")
	}
	a.ok("retention", "set", "--versions", "2")
	var dry, gc wire.GCResult
	a.into(&dry, "gc", "--dry-run")
	a.into(&gc, "gc")
	equal(t, "dry run versions", dry.Versions, int64(4))
	equal(t, "gc versions", gc.Versions, int64(4))
	equal(t, "chunks freed", gc.Chunks, dry.Chunks)
	var log struct {
		Versions []struct {
			N int64 `json:"version"`
		} `json:"versions"`
	}
	a.into(&log, "log", "/f")
	if len(log.Versions) != 2 || log.Versions[1].N != 6 {
		t.Fatalf("log after gc: %+v", log.Versions)
	}
	equal(t, "content", a.cat("/f"), "content 5")
}
