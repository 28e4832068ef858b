package wire

// VaultRetention is how much file history a vault keeps (vault.Retention
// is this type). History is thinned by three rules, each off at 0; a
// version goes when any rule says so. Never removed: the newest version of
// every live file (its current state), a version that holds a file's
// state at a checkpoint, and, while a process still reads a deleted file
// through an open descriptor, that file's newest version.
type VaultRetention struct {
	// Versions keeps at most this many versions per file, newest first.
	Versions int64 `json:"versions"`
	// MaxAgeS removes versions older than this many seconds (so the whole
	// history of a file deleted longer ago).
	MaxAgeS int64 `json:"max_age_s"`
	// HistoryPct bounds the bytes that only history holds (chunks no live
	// file, checkpoint or fork needs) to this percentage of the live data,
	// but never below HistoryMinMB: the oldest versions go first.
	HistoryPct   int64 `json:"history_pct"`
	HistoryMinMB int64 `json:"history_min_mb"`
}

// Off reports whether no rule thins history (every setting that is one is
// 0).
func (r VaultRetention) Off() bool {
	return r.Versions == 0 && r.MaxAgeS == 0 && r.HistoryPct == 0
}

// RetentionResult is the JSON document of `avfs retention show|set|clear`:
// the vault's settings and where its history stands.
type RetentionResult struct {
	Vault     string         `json:"vault"`
	Retention VaultRetention `json:"retention"`
	// LiveBytes is the logical size of the live files; StoredBytes the
	// stored bytes of every chunk (live data, checkpoints, history);
	// BudgetBytes what HistoryPct and HistoryMinMB allow history now
	// (0: no byte budget).
	LiveBytes   int64 `json:"live_bytes"`
	StoredBytes int64 `json:"stored_bytes"`
	BudgetBytes int64 `json:"budget_bytes"`
	Versions    int64 `json:"versions"` // versions recorded, all files
	// Decisions are the limits on the policy decisions the vault records
	// for replay (avfs policy replay) and how many it holds.
	Decisions DecisionRetention `json:"decisions"`
}

// DecisionRetention bounds the decisions a vault records: the newest Max
// (0 records none), none older than MaxAgeS seconds (0: any age).
type DecisionRetention struct {
	Max      int64 `json:"max"`
	MaxAgeS  int64 `json:"max_age_s"`
	Recorded int64 `json:"recorded"` // decisions recorded now
}
