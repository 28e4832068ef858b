package vault

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"avfs/wire"
)

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	ID      int64          `json:"id"`
	Time    time.Time      `json:"time"`
	Op      string         `json:"op"`
	Path    string         `json:"path"`
	PathB64 string         `json:"path_b64,omitempty"` // wire.B64 of Path
	Details map[string]any `json:"details"`
	Actor   string         `json:"actor"`
}

// AuditQuery filters Audit.
type AuditQuery struct {
	Limit int       // newest Limit entries (0: all)
	Since time.Time // entries at or after Since
}

// Audit returns audit entries, oldest first.
func (v *Vault) Audit(ctx context.Context, aq AuditQuery) ([]AuditEntry, error) {
	out := []AuditEntry{}
	err := v.view(ctx, "read audit log", func(q querier, _ state) error {
		query := "SELECT id, time_ns, op, path, details, actor FROM audit WHERE time_ns >= ? ORDER BY id DESC"
		args := []any{unixNanoOf(aq.Since)}
		if aq.Limit > 0 {
			query += " LIMIT ?"
			args = append(args, aq.Limit)
		}
		rows, err := q.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e AuditEntry
			var ns int64
			var details string
			if err := rows.Scan(&e.ID, &ns, &e.Op, &e.Path, &details, &e.Actor); err != nil {
				return err
			}
			e.Time, e.PathB64 = time.Unix(0, ns), wire.B64(e.Path)
			if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
				e.Details = map[string]any{"raw": details}
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, err
}

// AuditReport is the result of VerifyAudit (its JSON is pinned in wire).
type AuditReport = wire.AuditVerify

// maxAuditProblems bounds the problems a report lists; ProblemsTotal
// counts them all.
const maxAuditProblems = 100

// VerifyAudit checks the audit log and reports every problem found (it
// fails only when the log cannot be read):
//
//   - the plain chain: ids follow each other, each row's prev_hash is the
//     previous row's hash and its hash matches its content, and the log
//     ends at the head the state row records;
//   - the MACs, when the vault was opened with Options.AuditKey: each row
//     that has one carries HMAC-SHA256(key, hash); once a row has a MAC,
//     every later row must have one. Rows before the first MAC (written
//     before the installation had a key) are counted as unanchored, not
//     failed;
//   - the checkpoints: the chain head each recorded when it was taken is
//     still in the log with the same hash and MAC.
//
// What this proves (docs/vault.md, "Audit log"): someone with the vault
// file but not the key cannot write, edit, remove or reorder anchored
// rows, nor re-chain the log after removing some, without a problem
// reported. Someone with the key can re-chain, but not under a checkpoint
// they leave in place. Removing rows from the end together with the
// checkpoints taken after them, and setting the state row's head, is not
// detected: that needs a head kept outside the vault. Someone with the key
// and the vault can rewrite everything.
func (v *Vault) VerifyAudit(ctx context.Context) (AuditReport, error) {
	var rep AuditReport
	err := v.view(ctx, "verify audit log", func(q querier, st state) error {
		var err error
		rep, err = v.verifyAuditChain(ctx, q, st)
		return err
	})
	if err != nil {
		return AuditReport{Kind: wire.AuditVerifyKind, Problems: []wire.AuditProblem{}}, err
	}
	return rep, nil
}

func (v *Vault) verifyAuditChain(ctx context.Context, q querier, st state) (AuditReport, error) {
	rep := AuditReport{Kind: wire.AuditVerifyKind, Vault: st.name, Problems: []wire.AuditProblem{}, MAC: wire.AuditMACNone}
	add := func(p wire.AuditProblem) {
		rep.ProblemsTotal++
		if len(rep.Problems) < maxAuditProblems {
			rep.Problems = append(rep.Problems, p)
		}
	}
	rows, err := q.QueryContext(ctx, "SELECT id, time_ns, op, path, details, actor, prev_hash, hash, mac FROM audit ORDER BY id")
	if err != nil {
		return rep, err
	}
	defer rows.Close()
	key := v.auditKey
	prev := make([]byte, sha256.Size)
	var lastID, badMACs, firstBadMAC int64
	var lastMAC []byte
	for rows.Next() {
		var id, ns int64
		var op, path, details, actor string
		var prevHash, hash, mac []byte
		if err := rows.Scan(&id, &ns, &op, &path, &details, &actor, &prevHash, &hash, &mac); err != nil {
			return rep, err
		}
		rep.Entries++
		if id != lastID+1 {
			add(wire.AuditProblem{Reason: wire.AuditRowsMissing, Row: id, Message: fmt.Sprintf("rows %d to %d are missing before this one", lastID+1, id-1)})
		}
		if !bytes.Equal(prevHash, prev) {
			add(wire.AuditProblem{Reason: wire.AuditLinkBroken, Row: id, Message: "previous-hash link is broken (a row before it was changed or removed)"})
		}
		if !bytes.Equal(auditHash(prevHash, id, ns, op, path, details, actor), hash) {
			add(wire.AuditProblem{Reason: wire.AuditHashMismatch, Row: id, Message: "row content does not match its hash (it was edited)"})
		}
		switch {
		case len(mac) == 0 && rep.AnchoredFrom == 0:
			rep.Unanchored++
		case len(mac) == 0:
			add(wire.AuditProblem{Reason: wire.AuditMACMissing, Row: id, Message: fmt.Sprintf("the row has no MAC, but the chain is anchored from row %d (its MAC was stripped, or it was written without the audit key)", rep.AnchoredFrom)})
		default:
			rep.Anchored++
			if rep.AnchoredFrom == 0 {
				rep.AnchoredFrom = id
			}
			if key != nil && !hmac.Equal(mac, auditMAC(key, hash)) {
				badMACs++
				if firstBadMAC == 0 {
					firstBadMAC = id
				}
				if badMACs <= maxAuditProblems {
					// Held back until the end: when no MAC matches, one key_mismatch says it.
					rep.Problems = append(rep.Problems, wire.AuditProblem{Reason: wire.AuditMACMismatch, Row: id,
						Message: "the row's MAC does not match the audit key (written, edited or re-chained without the key)"})
				}
			}
		}
		prev, lastID, lastMAC = hash, id, mac
	}
	if err := rows.Err(); err != nil {
		return rep, err
	}
	if badMACs > 0 && badMACs == rep.Anchored {
		// Every anchored row fails: most likely another installation's key.
		kept := rep.Problems[:0]
		for _, p := range rep.Problems {
			if p.Reason != wire.AuditMACMismatch {
				kept = append(kept, p)
			}
		}
		rep.Problems = kept
		add(wire.AuditProblem{Reason: wire.AuditKeyMismatch, Row: firstBadMAC, Message: fmt.Sprintf(
			"none of the %d MACs matches this installation's audit key: the log was written under another key (a vault from another machine), or every MAC was forged", badMACs)})
	} else {
		rep.ProblemsTotal += badMACs
		if len(rep.Problems) > maxAuditProblems {
			rep.Problems = rep.Problems[:maxAuditProblems]
		}
	}
	rep.Head = wire.AuditHead{ID: lastID, Hash: hex.EncodeToString(prev), MAC: hex.EncodeToString(lastMAC)}
	if lastID == 0 {
		rep.Head.Hash = ""
	}
	if lastID != st.auditID || (st.auditID > 0 && !bytes.Equal(prev, []byte(st.auditHash))) {
		add(wire.AuditProblem{Reason: wire.AuditHeadMismatch, Row: lastID, Message: fmt.Sprintf("the log ends at row %d but the vault recorded row %d as its last (rows were removed from the end, or the head was edited)", lastID, st.auditID)})
	}
	switch {
	case rep.Anchored == 0:
		rep.MAC = wire.AuditMACNone
	case key == nil:
		rep.MAC = wire.AuditMACNoKey
	default:
		rep.MAC = wire.AuditMACChecked
	}
	if err := verifyCheckpointHeads(ctx, q, &rep, add); err != nil {
		return rep, err
	}
	rep.OK = rep.ProblemsTotal == 0
	return rep, nil
}

// verifyCheckpointHeads checks that the chain head each checkpoint
// recorded is still in the log, with the same hash and MAC.
func verifyCheckpointHeads(ctx context.Context, q querier, rep *AuditReport, add func(wire.AuditProblem)) error {
	rows, err := q.QueryContext(ctx, `SELECT c.id, c.audit_id, c.audit_hash, c.audit_mac, a.hash, a.mac
		FROM checkpoints c LEFT JOIN audit a ON a.id = c.audit_id WHERE c.audit_id > 0 ORDER BY c.id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var cp, id int64
		var wantHash, wantMAC, hash, mac []byte
		if err := rows.Scan(&cp, &id, &wantHash, &wantMAC, &hash, &mac); err != nil {
			return err
		}
		rep.Checkpoints++
		switch {
		case hash == nil:
			add(wire.AuditProblem{Reason: wire.AuditCheckpointHeadMissing, Row: id, Checkpoint: cp,
				Message: fmt.Sprintf("checkpoint %d recorded row %d as the chain's head, and the row is gone (rows were removed)", cp, id)})
		case !bytes.Equal(hash, wantHash) || !bytes.Equal(mac, wantMAC):
			add(wire.AuditProblem{Reason: wire.AuditCheckpointHeadMismatch, Row: id, Checkpoint: cp,
				Message: fmt.Sprintf("checkpoint %d recorded row %d as the chain's head with another hash or MAC (the history up to it was rewritten)", cp, id)})
		}
	}
	return rows.Err()
}

// Event appends one audit row for something that happened around the vault
// (a run's decision and outcome) without changing anything else.
func (v *Vault) Event(ctx context.Context, op, path string, details map[string]any) error {
	return v.update(ctx, op, func(t *txn) error {
		t.audit(op, path, details)
		return nil
	})
}
