package wire

// LabelsKind is the kind of `avfs tag --json` and `avfs meta --json`.
const LabelsKind = "labels"

// Labels are the tags and metadata of one vault entry, after the command
// that printed them changed them (`avfs tag`, `avfs meta`).
type Labels struct {
	Kind    string            `json:"kind"` // LabelsKind
	Path    string            `json:"path"`
	PathB64 string            `json:"path_b64,omitempty"` // B64 of Path
	Tags    []string          `json:"tags"`               // sorted
	Meta    map[string]string `json:"meta"`               // KEY -> VALUE
}
