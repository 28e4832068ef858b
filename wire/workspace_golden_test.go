package wire

import (
	"testing"
	"time"
)

func TestGoldenWorkspace(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)
	removed := int64(2)
	up := WorkspaceStatus{Kind: WorkspaceKind, Dir: "/home/alice/proj", Vault: "proj-1a2b3c4d", State: WorkspaceUp, PID: 4242,
		Socket: "/home/alice/.avfs/run/workspaces/1a2b3c4d5e6f7081.sock", StartedAt: &at,
		Imported: &TransferCount{Files: 120, Dirs: 14, Symlinks: 1, Bytes: 532100}}
	down := WorkspaceStatus{Kind: WorkspaceKind, Dir: "/home/alice/proj", Vault: "proj-1a2b3c4d", State: WorkspaceDown,
		Exported: &TransferCount{Files: 121, Dirs: 14, Symlinks: 1, Bytes: 533000}, Removed: &removed}
	docs := map[string]any{
		"workspace_up":   up,
		"workspace_down": down,
		"workspace_list": WorkspaceList{Kind: WorkspaceListKind, Workspaces: []WorkspaceStatus{
			{Kind: WorkspaceKind, Dir: "/home/alice/proj", Vault: "proj-1a2b3c4d", State: WorkspaceUp, PID: 4242,
				Socket: "/home/alice/.avfs/run/workspaces/1a2b3c4d5e6f7081.sock", StartedAt: &at},
			{Kind: WorkspaceKind, Dir: "/home/alice/site", Vault: "site-99aa0b1c", State: WorkspaceDown}}},
	}
	for name, v := range docs {
		checkGolden(t, name, v)
	}
}
