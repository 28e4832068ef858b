package wire

// CacheReport is the JSON document of `avfs cache show` and `avfs cache
// clear`: a vault's tool cache, the host directory bound at ~/.cache in
// its runs' sandboxes (docs/sandbox.md).
type CacheReport struct {
	Vault    string       `json:"vault"`
	Dir      string       `json:"dir"`       // the host directory
	Bytes    int64        `json:"bytes"`     // of its regular files
	MaxBytes int64        `json:"max_bytes"` // the cap (sandbox.cache_size): trimmed to it after each run
	Cleared  bool         `json:"cleared"`   // cache clear emptied it
	Entries  []CacheEntry `json:"entries"`   // one per tool cache, by name
}

// CacheEntry is one tool's cache (go-build, go-mod, npm, pip …).
type CacheEntry struct {
	Name     string `json:"name"`
	Bytes    int64  `json:"bytes"`
	Modified string `json:"modified"` // the newest change beneath it, RFC 3339 in UTC
}
