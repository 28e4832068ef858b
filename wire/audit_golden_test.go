package wire

import "testing"

func TestGoldenAuditVerify(t *testing.T) {
	ok := AuditVerify{Kind: AuditVerifyKind, Vault: "work", OK: true, Entries: 42, MAC: AuditMACChecked, Anchored: 30, Unanchored: 12, AnchoredFrom: 13,
		Checkpoints: 4, Head: AuditHead{ID: 42, Hash: "5d1c0b2e8a7f4c3e9b6a1d0f2e4c6b8a9d7e5f3c1b2a4d6e8f0a1c3e5b7d9f2a",
			MAC: "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"}, Problems: []AuditProblem{}}
	checkGolden(t, "audit_verify", ok)
	failed := ok
	failed.OK, failed.ProblemsTotal = false, 2
	failed.Problems = []AuditProblem{
		{Reason: AuditMACMismatch, Row: 40, Message: "the row's MAC does not match the audit key (written, edited or re-chained without the key)"},
		{Reason: AuditCheckpointHeadMismatch, Row: 38, Checkpoint: 4, Message: "checkpoint 4 recorded row 38 as the chain's head with another hash or MAC (the history up to it was rewritten)"},
	}
	checkGolden(t, "audit_verify_failed", ErrorDocument{Error: ErrorObject(failed.Err())})
	if ok.Err() != nil {
		t.Fatal("a passing report is an error")
	}
	for _, f := range AuditFaults {
		if f == "" {
			t.Fatal("empty fault")
		}
	}
}
