package vault

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path"
	"strings"
	"time"

	"avfs/wire"
)

// AuditExportOptions says what ExportAudit writes.
type AuditExportOptions struct {
	Format wire.AuditExportFormat
	Since  time.Time // rows at or after Since (zero: all)
	// Product names avfs in OCSF events' metadata.product (its version is
	// the build's).
	Product wire.OCSFProduct
	// Hostname, when set, is the OCSF events' device.hostname.
	Hostname string
}

// ExportAudit writes the audit rows of the vault at or after opts.Since,
// oldest first, to w, one JSON object a line in opts.Format: a
// wire.AuditEvent per row (jsonl), or a wire.OCSFEvent (ocsf, mapped by
// ocsfOps; an op it does not list is a Base Event, never left out). It
// returns the number of lines written.
//
// It streams: rows are read one at a time in one read-only transaction
// (the export is one consistent snapshot of the log, however long it
// takes) and written through a buffer, never the whole log in memory. It
// never writes to the vault and never checks the chain (VerifyAudit does):
// it exports the rows as stored, chain fields included, so that the
// reader can.
//
// Failure modes: an unknown format is a usage error before anything is
// written; a read or write error ends the export with the lines written
// so far counted (a partial last line may be in w).
//
// Concurrency: safe beside the vault's writers (a snapshot read); rows
// written meanwhile are not in the export.
func (v *Vault) ExportAudit(ctx context.Context, w io.Writer, opts AuditExportOptions) (int64, error) {
	var line func(vaultName string, r storedAuditRow) any
	switch opts.Format {
	case wire.AuditExportJSONL:
		line = func(vaultName string, r storedAuditRow) any { return r.event(vaultName) }
	case wire.AuditExportOCSF:
		line = func(vaultName string, r storedAuditRow) any { return r.ocsf(vaultName, opts) }
	default:
		return 0, wire.Errorf(wire.CodeUsage, "unknown audit export format %q (want jsonl or ocsf)", opts.Format)
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // details stay byte for byte as stored
	var n int64
	err := v.view(ctx, "export audit log", func(q querier, st state) error {
		since := unixNanoOf(opts.Since)
		rows, err := q.QueryContext(ctx, "SELECT id, time_ns, op, path, details, actor, prev_hash, hash, mac FROM audit WHERE time_ns >= ? ORDER BY id", since)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r storedAuditRow
			if err := rows.Scan(&r.id, &r.timeNS, &r.op, &r.path, &r.details, &r.actor, &r.prevHash, &r.hash, &r.mac); err != nil {
				return err
			}
			r.fields = nil
			_ = json.Unmarshal([]byte(r.details), &r.fields) // details that are not an object map nothing
			if err := enc.Encode(line(st.name, r)); err != nil {
				return wire.Errorf(wire.CodeHostIO, "write the audit export: %w", err)
			}
			n++
		}
		return rows.Err()
	})
	if err != nil {
		return n, err
	}
	if err := bw.Flush(); err != nil {
		return n, wire.Errorf(wire.CodeHostIO, "write the audit export: %w", err)
	}
	return n, nil
}

// unixNanoOf is t in Unix nanoseconds, clamped to what they can hold (a
// time after 2262 is later than every row, one before 1678 or zero earlier).
func unixNanoOf(t time.Time) int64 {
	switch {
	case t.IsZero() || t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// storedAuditRow is one row of the audit table as stored, with its
// details read as an object (nil when they are not one).
type storedAuditRow struct {
	id, timeNS               int64
	op, path, details, actor string
	prevHash, hash, mac      []byte
	fields                   map[string]any
}

// event is the row as a wire.AuditEvent.
func (r storedAuditRow) event(vaultName string) wire.AuditEvent {
	details := json.RawMessage(r.details)
	if !json.Valid(details) {
		// Never written so (details are marshalled JSON); kept as a string
		// rather than dropped.
		details, _ = json.Marshal(map[string]string{"raw": r.details})
	}
	e := wire.AuditEvent{Vault: vaultName, ID: r.id, Time: time.Unix(0, r.timeNS).UTC(), TimeNS: r.timeNS, Op: r.op, Path: r.path,
		PathB64: wire.B64(r.path), Details: details, Actor: r.actor,
		PrevHash: hex.EncodeToString(r.prevHash), Hash: hex.EncodeToString(r.hash), MAC: hex.EncodeToString(r.mac)}
	e.DecisionID, _ = r.fields["decision_id"].(string)
	return e
}

// ocsfMapping is the OCSF class and activity of an audit op.
type ocsfMapping struct {
	class    wire.OCSFClass
	activity wire.OCSFActivity
	// ended, when set, is the activity of a row whose details have an
	// exit_code (a run's last row: its command ended).
	ended    wire.OCSFActivity
	fileType int // OCSF file type_id of the path: 0 unknown, 1 regular file, 2 folder, 7 symbolic link
}

// ocsfOps maps audit ops to OCSF classes and activities; an op not listed
// is a Base Event (class 0, activity Other). docs/audit.md has this table.
var ocsfOps = map[string]ocsfMapping{
	"exec": {class: wire.OCSFProcessActivity, activity: wire.OCSFActivityLaunch, ended: wire.OCSFActivityTerminate},

	"create":  {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityCreate, fileType: 1},
	"write":   {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityUpdate, fileType: 1},
	"mkdir":   {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityCreate, fileType: 2},
	"symlink": {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityCreate, fileType: 7},
	"link":    {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityCreate, fileType: 1},
	"copy":    {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityCreate},
	"remove":  {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityDelete},
	"rmdir":   {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityDelete, fileType: 2},
	"move":    {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityRename},
	"chmod":   {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivitySetAttributes},
	"revert":  {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityUpdate, fileType: 1},
	"merge":   {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityUpdate},

	"checkpoint.save":    {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
	"checkpoint.restore": {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
	"checkpoint.delete":  {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
	"import":             {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
	"sync":               {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
	"vault.merge":        {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
	"preview.apply":      {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
	"effects.hold":       {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
	"effects.apply":      {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
	"effects.discard":    {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
	"effects.undo":       {class: wire.OCSFFileSystemActivity, activity: wire.OCSFActivityOther, fileType: 2},
}

// OCSF names of the classes, categories, activities, file types,
// severities and statuses avfs uses.
var (
	ocsfClassNames    = map[wire.OCSFClass]string{wire.OCSFBaseEvent: "Base Event", wire.OCSFFileSystemActivity: "File System Activity", wire.OCSFProcessActivity: "Process Activity"}
	ocsfCategoryOf    = map[wire.OCSFClass]wire.OCSFCategory{wire.OCSFBaseEvent: wire.OCSFUncategorized, wire.OCSFFileSystemActivity: wire.OCSFSystemActivity, wire.OCSFProcessActivity: wire.OCSFSystemActivity}
	ocsfCategoryNames = map[wire.OCSFCategory]string{wire.OCSFUncategorized: "Uncategorized", wire.OCSFSystemActivity: "System Activity"}
	ocsfActivityNames = map[wire.OCSFClass]map[wire.OCSFActivity]string{
		wire.OCSFProcessActivity: {wire.OCSFActivityLaunch: "Launch", wire.OCSFActivityTerminate: "Terminate"},
		wire.OCSFFileSystemActivity: {wire.OCSFActivityCreate: "Create", wire.OCSFActivityUpdate: "Update", wire.OCSFActivityDelete: "Delete",
			wire.OCSFActivityRename: "Rename", wire.OCSFActivitySetAttributes: "Set Attributes"},
	}
	ocsfFileTypes     = map[int]string{0: "Unknown", 1: "Regular File", 2: "Folder", 7: "Symbolic Link"}
	ocsfSeverityNames = map[wire.OCSFSeverity]string{wire.OCSFSeverityInformational: "Informational", wire.OCSFSeverityLow: "Low", wire.OCSFSeverityMedium: "Medium"}
	ocsfStatusNames   = map[wire.OCSFStatus]string{wire.OCSFStatusSuccess: "Success", wire.OCSFStatusFailure: "Failure"}
	// ocsfDecisionSeverity is the severity of a run by its decision;
	// every other row is informational.
	ocsfDecisionSeverity = map[string]wire.OCSFSeverity{string(wire.Deny): wire.OCSFSeverityMedium, string(wire.RequireApproval): wire.OCSFSeverityLow}
)

// baseMapping is the mapping of an op ocsfOps does not list.
var baseMapping = ocsfMapping{class: wire.OCSFBaseEvent, activity: wire.OCSFActivityOther}

// ocsf is the row as an OCSF event.
func (r storedAuditRow) ocsf(vaultName string, opts AuditExportOptions) wire.OCSFEvent {
	m, ok := ocsfOps[r.op]
	if !ok {
		m = baseMapping
	}
	f := r.fields
	exit, ended := f["exit_code"].(float64)
	activity := m.activity
	if ended && m.ended != 0 {
		activity = m.ended
	}
	activityName, ok := ocsfActivityNames[m.class][activity]
	if !ok {
		activityName = r.op // Other: the op says which
	}
	category := ocsfCategoryOf[m.class]
	decision, _ := f["decision"].(string)
	severity, ok := ocsfDecisionSeverity[decision]
	if !ok {
		severity = wire.OCSFSeverityInformational
	}
	status := wire.OCSFStatusSuccess
	if _, failed := f["error"]; failed || decision == string(wire.Deny) || (ended && exit != 0) {
		status = wire.OCSFStatusFailure
	}
	row := r.event(vaultName)
	e := wire.OCSFEvent{ActivityID: activity, ActivityName: activityName, CategoryUID: category, CategoryName: ocsfCategoryNames[category],
		ClassUID: m.class, ClassName: ocsfClassNames[m.class], TypeUID: int(m.class)*100 + int(activity),
		TypeName: ocsfClassNames[m.class] + ": " + activityName, Time: r.timeNS / int64(time.Millisecond),
		SeverityID: severity, Severity: ocsfSeverityNames[severity], StatusID: status, Status: ocsfStatusNames[status],
		Message:  strings.TrimSpace(r.op + " " + r.path),
		Metadata: wire.OCSFMetadata{Product: opts.Product, Version: wire.OCSFSchemaVersion, UID: row.Hash, CorrelationUID: row.DecisionID, LogName: "avfs.audit/" + vaultName},
		Actor:    wire.OCSFActor{User: wire.OCSFUser{Name: r.actor}},
		Unmapped: row}
	if decision != "" {
		e.Message += ": " + decision
	}
	if opts.Hostname != "" {
		e.Device = &wire.OCSFDevice{Hostname: opts.Hostname}
	}
	switch m.class {
	case wire.OCSFProcessActivity:
		p := &wire.OCSFProcess{}
		p.UID, _ = f["id"].(string)
		if sh, _ := f["shell"].(string); sh != "" {
			p.CmdLine = sh
		} else if argv, ok := f["argv"].([]any); ok {
			words := make([]string, 0, len(argv))
			for _, a := range argv {
				words = append(words, fmt.Sprint(a))
			}
			p.CmdLine = strings.Join(words, " ")
		}
		e.Process = p
		if ended {
			code := int(exit)
			e.ExitCode = &code
		}
	case wire.OCSFFileSystemActivity:
		e.File = &wire.OCSFFile{Name: path.Base(r.path), Path: r.path, TypeID: m.fileType, Type: ocsfFileTypes[m.fileType]}
	}
	return e
}
