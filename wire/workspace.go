package wire

import "time"

// WorkspaceState is whether a workspace's vault is mounted at its directory.
type WorkspaceState string

// Workspace states.
const (
	WorkspaceUp   WorkspaceState = "up"   // mounted, and served by a live avfs (pid, socket)
	WorkspaceDown WorkspaceState = "down" // bound to its vault, not mounted: the directory shows the host's files
)

// WorkspaceKind is the kind of a WorkspaceStatus document.
const WorkspaceKind = "workspace"

// WorkspaceListKind is the kind of a WorkspaceList document.
const WorkspaceListKind = "workspace_list"

// WorkspaceStatus is what `avfs --json workspace up|down` prints, and one
// entry of `workspace list`: a project directory that is a vault.
type WorkspaceStatus struct {
	Kind      string         `json:"kind"` // "workspace"
	Dir       string         `json:"dir"`
	Vault     string         `json:"vault"`
	State     WorkspaceState `json:"state"`
	PID       int            `json:"pid,omitempty"`        // up: the avfs that serves it
	Socket    string         `json:"socket,omitempty"`     // up: where that avfs answers the serve API
	StartedAt *time.Time     `json:"started_at,omitempty"` // up: since when
	// Imported is what the first `up` copied from the directory into the
	// new vault; absent when the vault existed already.
	Imported *TransferCount `json:"imported,omitempty"`
	// Exported is what `down --export` wrote back into the directory.
	Exported *TransferCount `json:"exported,omitempty"`
	// Removed counts the host entries `down --export` removed because the
	// vault no longer has them.
	Removed *int64 `json:"removed,omitempty"`
	// Forgotten says that `down --forget` removed the binding: the
	// directory is no longer the vault's.
	Forgotten bool `json:"forgotten,omitempty"`
	// Already says that `up` found it up, or `down` found it down:
	// nothing was done.
	Already bool `json:"already,omitempty"`
}

// TransferCount counts what an import or export copied.
type TransferCount struct {
	Files    int64 `json:"files"`
	Dirs     int64 `json:"dirs"`
	Symlinks int64 `json:"symlinks"`
	Special  int64 `json:"special"`
	Bytes    int64 `json:"bytes"`
}

// WorkspaceList is what `avfs --json workspace list` prints.
type WorkspaceList struct {
	Kind       string            `json:"kind"` // "workspace_list"
	Workspaces []WorkspaceStatus `json:"workspaces"`
}
