package wire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestGoldenCacheReport pins the JSON of avfs cache show.
func TestGoldenCacheReport(t *testing.T) {
	rep := CacheReport{Vault: "default", Dir: "/home/alice/.avfs/cache/default", Bytes: 123456, MaxBytes: 2 << 30,
		Entries: []CacheEntry{{Name: "go-build", Bytes: 120000, Modified: "2026-12-01T18:00:00Z"}, {Name: "pip", Bytes: 3456, Modified: "2026-11-30T09:12:00Z"}}}
	got, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "golden", "cache_report.json")
	if *update {
		os.WriteFile(path, got, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./wire -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("cache report changed: fields may be added, never renamed or removed.\n got %s\nwant %s", got, want)
	}
}
