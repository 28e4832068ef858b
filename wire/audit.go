package wire

import (
	"encoding/json"
	"fmt"
)

// AuditVerifyKind is the kind of an AuditVerify document.
const AuditVerifyKind = "audit_verify"

// AuditVerify is what `avfs --json audit verify` prints when the log
// verifies (vault.AuditReport is this type). When it does not, the command
// exits 1 with an integrity_failed error whose details are these fields
// (vault, ok, entries, mac, anchored, unanchored, anchored_from,
// checkpoints, head, problems, problems_total).
//
// What a passing report proves depends on mac (docs/vault.md, "Audit
// log"): with "checked", no row from anchored_from on was written, edited,
// removed or reordered by anyone without the installation's audit key, and
// no row up to the newest checkpoint's recorded head was removed or
// rewritten since that checkpoint, even by someone with the key who left
// the checkpoints alone. Rows after the newest checkpoint that were cut
// off the end, together with the state row's head, cannot be told from a
// log that was never longer: that needs a head kept outside the vault.
type AuditVerify struct {
	Kind         string         `json:"kind"` // "audit_verify"
	Vault        string         `json:"vault"`
	OK           bool           `json:"ok"`
	Entries      int64          `json:"entries"`       // rows read
	MAC          AuditMACStatus `json:"mac"`           // whether the rows' MACs were checked
	Anchored     int64          `json:"anchored"`      // rows that carry a MAC
	Unanchored   int64          `json:"unanchored"`    // rows without a MAC written before the first one that has one (before the vault had a key)
	AnchoredFrom int64          `json:"anchored_from"` // id of the first row with a MAC; 0 when none has one
	Checkpoints  int64          `json:"checkpoints"`   // checkpoints whose recorded chain head was checked
	Head         AuditHead      `json:"head"`          // the last row of the log
	Problems     []AuditProblem `json:"problems"`      // never null; at most the first 100
	// ProblemsTotal counts every problem found, those left out of Problems included.
	ProblemsTotal int64 `json:"problems_total"`
}

// AuditHead names one row of the audit chain: its id, hash and MAC (hex;
// "" when the row has no MAC).
type AuditHead struct {
	ID   int64  `json:"id"`
	Hash string `json:"hash"`
	MAC  string `json:"mac"`
}

// AuditMACStatus says whether audit verify could check the rows' MACs.
type AuditMACStatus string

// MAC statuses.
const (
	AuditMACChecked AuditMACStatus = "checked" // the installation's audit key was at hand and every MAC was checked with it
	AuditMACNoKey   AuditMACStatus = "no_key"  // rows carry MACs but this installation has no audit key (a vault copied from another machine): only the plain chain and the checkpoint heads were checked
	AuditMACNone    AuditMACStatus = "none"    // no row carries a MAC (the log predates the key, or every MAC was stripped): only the plain chain and the checkpoint heads were checked
)

// AuditFault says what is wrong with the audit log: the reason of one
// AuditProblem.
type AuditFault string

// Audit faults.
const (
	AuditRowsMissing            AuditFault = "rows_missing"             // row ids skip before this row: rows were deleted
	AuditLinkBroken             AuditFault = "link_broken"              // the row's previous hash is not the previous row's hash: a row before it was changed or removed
	AuditHashMismatch           AuditFault = "hash_mismatch"            // the row's content does not match its hash: it was edited
	AuditMACMismatch            AuditFault = "mac_mismatch"             // the row's MAC is not the key's MAC of its hash: written, edited or re-chained without the key
	AuditMACMissing             AuditFault = "mac_missing"              // a row without a MAC after the chain was anchored: its MAC was stripped, or it was written without the key
	AuditKeyMismatch            AuditFault = "key_mismatch"             // no MAC matches the key: the log was written under another installation's key (or every MAC was forged)
	AuditHeadMismatch           AuditFault = "head_mismatch"            // the log does not end at the head the vault's state row records: rows were removed from the end, or the head was edited
	AuditCheckpointHeadMissing  AuditFault = "checkpoint_head_missing"  // the row a checkpoint recorded as the chain's head is gone: rows were removed
	AuditCheckpointHeadMismatch AuditFault = "checkpoint_head_mismatch" // the row a checkpoint recorded as the chain's head has another hash or MAC now: the history before it was rewritten
)

// AuditFaults lists every audit fault.
var AuditFaults = []AuditFault{AuditRowsMissing, AuditLinkBroken, AuditHashMismatch, AuditMACMismatch, AuditMACMissing,
	AuditKeyMismatch, AuditHeadMismatch, AuditCheckpointHeadMissing, AuditCheckpointHeadMismatch}

// AuditProblem is one problem audit verify found.
type AuditProblem struct {
	Reason     AuditFault `json:"reason"`
	Row        int64      `json:"row,omitempty"`        // the audit row concerned
	Checkpoint int64      `json:"checkpoint,omitempty"` // the checkpoint concerned
	Message    string     `json:"message"`
}

// Err returns nil when the report is OK, else the integrity_failed error
// of audit verify: its details are the report's fields but kind.
func (r AuditVerify) Err() error {
	if r.OK {
		return nil
	}
	e := Errorf(CodeIntegrity, "audit log of %s: %d problem(s)", r.Vault, r.ProblemsTotal)
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w (%v)", e, err)
	}
	var fields map[string]any
	_ = json.Unmarshal(b, &fields)
	for k, f := range fields {
		if k != "kind" {
			e = e.With(k, f)
		}
	}
	return e
}
