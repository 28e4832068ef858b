package wire

import "testing"

// TestGoldenCacheReport pins the JSON of avfs cache show.
func TestGoldenCacheReport(t *testing.T) {
	rep := CacheReport{Vault: "default", Dir: "/home/alice/.avfs/cache/default", Bytes: 123456, MaxBytes: 2 << 30,
		Entries: []CacheEntry{{Name: "go-build", Bytes: 120000, Modified: "2026-12-01T18:00:00Z"}, {Name: "pip", Bytes: 3456, Modified: "2026-11-30T09:12:00Z"}}}
	checkGolden(t, "cache_report", rep)
}
