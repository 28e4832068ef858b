package wire

// GrepResultKind is the kind of `avfs grep --json`.
const GrepResultKind = "grep_result"

// GrepResult is what `avfs grep` found in a vault's files.
type GrepResult struct {
	Kind    string      `json:"kind"` // GrepResultKind
	Vault   string      `json:"vault"`
	Pattern string      `json:"pattern"`
	Matches []GrepMatch `json:"matches"` // matching lines, by file then line; none with -l or -c
	Files   []GrepFile  `json:"files"`   // the files with matches (with -v: with lines that do not match)
	Total   int         `json:"total"`   // matching lines in all files
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"` // B64 of Path
	Line    int    `json:"line"`               // from 1
	Text    string `json:"text"`               // the line without its newline; invalid UTF-8 as U+FFFD
}

// GrepFile is a file with matches.
type GrepFile struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"` // B64 of Path
	Matches int    `json:"matches"`            // matching lines
	Binary  bool   `json:"binary"`             // a NUL in its first 8 KiB: its lines are not listed
}
