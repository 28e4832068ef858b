package wire

// FindResultKind is the kind of the `avfs find --json` document.
const FindResultKind = "find_result"

// FindResult is the JSON document of `avfs find`: the entries under Root
// that every filter given accepts, in walk order (parents before children,
// names sorted).
type FindResult struct {
	Kind    string      `json:"kind"` // FindResultKind
	Vault   string      `json:"vault"`
	Root    string      `json:"root"`
	RootB64 string      `json:"root_b64,omitempty"` // B64 of Root
	Matches []FindMatch `json:"matches"`            // never null
	Total   int         `json:"total"`              // len(Matches)
}

// FindMatch is one entry `avfs find` matched.
type FindMatch struct {
	Path      string `json:"path"`
	PathB64   string `json:"path_b64,omitempty"` // B64 of Path
	Type      string `json:"type"`               // file, dir, symlink, fifo, socket
	Size      int64  `json:"size"`
	Mode      string `json:"mode"`  // permission bits, octal string such as "0644"
	Mtime     string `json:"mtime"` // RFC 3339, UTC
	Target    string `json:"target,omitempty"`
	TargetB64 string `json:"target_b64,omitempty"` // B64 of Target
}
