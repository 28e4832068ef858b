package wire

import (
	"testing"
	"time"
)

// TestGoldenReplay pins `avfs policy replay --json`.
func TestGoldenReplay(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 1, 0, time.UTC)
	since := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	recorded := []BundleInfo{{Name: "default", Revision: "avfs-default-1", Roots: []string{"avfs"}}}
	checkGolden(t, "policy_replay", ReplayResult{Kind: ReplayKind, Against: BaselineRecorded, FailOn: FailOnLooser, Since: &since,
		Bundles:         []BundleInfo{{Name: "default", Revision: "avfs-default-1", Roots: []string{"avfs"}}, {Name: "acme.tar.gz", Revision: "acme-7", Roots: []string{"extensions/acme"}}},
		BaselineBundles: []BundleInfo{}, Sources: []string{"default"}, Replayed: 120,
		Changes: []ReplayChange{
			{DecisionID: "6f1d3c2a-8b4e-4f0a-9c1d-2e3f4a5b6c7d", Vault: "default", Time: &at, Source: SourceExec, Command: "curl https://example.com",
				From: Deny, To: RequireApproval, Kind: ChangeLooser, ReasonsFrom: []string{"acme.deny.network"}, ReasonsTo: []string{"avfs.approval.network"},
				Recorded: Deny, RecordedBundles: recorded},
			{DecisionID: "0b7e4a51-3c2d-4e8f-a1b2-c3d4e5f60718", Vault: "default", Time: &at, Source: SourceHook, Command: "make deploy",
				From: AllowWithCheckpoint, To: RequireApproval, Kind: ChangeStricter, ReasonsFrom: []string{"avfs.checkpoint.changes"}, ReasonsTo: []string{"acme.approval.deploy"},
				Recorded: AllowWithCheckpoint, RecordedBundles: recorded},
		},
		Totals: []ReplayTotal{{From: Deny, To: RequireApproval, Kind: ChangeLooser, Count: 1}, {From: AllowWithCheckpoint, To: RequireApproval, Kind: ChangeStricter, Count: 1}},
		Looser: 1, Stricter: 1, Failed: true})
}
