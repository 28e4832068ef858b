package wire

import (
	"encoding/json"
	"time"
)

// AuditExportFormat is the format of `avfs audit export`: one JSON object
// a line, in either.
type AuditExportFormat string

// Audit export formats.
const (
	AuditExportJSONL AuditExportFormat = "jsonl" // one AuditEvent a line: the rows as stored, chain fields included
	AuditExportOCSF  AuditExportFormat = "ocsf"  // one OCSFEvent a line: OCSF 1.x events, the row itself in unmapped
)

// AuditExportFormats lists every export format.
var AuditExportFormats = []AuditExportFormat{AuditExportJSONL, AuditExportOCSF}

// AuditEvent is one row of a vault's audit log as `avfs audit export
// --format jsonl` writes it (one a line, oldest first), and the unmapped
// object of its OCSF event. Its fields are the row's as stored, so that a
// reader can recompute the chain (docs/vault.md, "Audit log"): hash =
// SHA-256(prev_hash, id, time_ns, op, path, details, actor), with details
// the exact bytes given here, and mac = HMAC-SHA256(audit key, hash).
type AuditEvent struct {
	Vault   string    `json:"vault"`
	ID      int64     `json:"id"`      // the row's id: 1, 2, … without gaps
	Time    time.Time `json:"time"`    // when, UTC
	TimeNS  int64     `json:"time_ns"` // when, in Unix nanoseconds as hashed
	Op      string    `json:"op"`      // what happened: exec, write, checkpoint.save, … (docs/audit.md)
	Path    string    `json:"path"`    // the vault path concerned ("" for none)
	PathB64 string    `json:"path_b64,omitempty"`
	// Details is the row's details object, byte for byte as stored and
	// hashed.
	Details json.RawMessage `json:"details"`
	Actor   string          `json:"actor"` // who: cli:USER, serve, mcp, …
	// DecisionID is the details' decision_id when the row has one (a run's
	// exec row): the policy decision's id in the vault's decision records,
	// the envelope and decision logs.
	DecisionID string `json:"decision_id,omitempty"`
	PrevHash   string `json:"prev_hash"`     // hex SHA-256: the previous row's hash (zeros for the first)
	Hash       string `json:"hash"`          // hex SHA-256 of the row
	MAC        string `json:"mac,omitempty"` // hex HMAC-SHA256 of hash under the audit key; absent for rows written without one
}

// AuditExportKind is the kind of an AuditExport document.
const AuditExportKind = "audit_export"

// AuditExport is what `avfs --json audit export --out FILE` prints once
// the file is written (without --out the export itself is the output).
type AuditExport struct {
	Kind   string            `json:"kind"` // "audit_export"
	Format AuditExportFormat `json:"format"`
	Out    string            `json:"out"`    // the file written
	Vaults []string          `json:"vaults"` // the vaults exported, in order
	Events int64             `json:"events"` // lines written
}

// OCSFSchemaVersion is the OCSF schema version the events of `avfs audit
// export --format ocsf` follow (their metadata.version).
const OCSFSchemaVersion = "1.3.0"

// OCSFEvent is one audit row as an OCSF event (schema OCSFSchemaVersion):
// a run's exec row is a Process Activity, a row about files, checkpoints
// or restores a File System Activity, every other row a Base Event
// (docs/audit.md has the table). The row itself, chain fields and
// decision_id included, is unmapped.
type OCSFEvent struct {
	ActivityID   OCSFActivity `json:"activity_id"`
	ActivityName string       `json:"activity_name"`
	CategoryUID  OCSFCategory `json:"category_uid"`
	CategoryName string       `json:"category_name"`
	ClassUID     OCSFClass    `json:"class_uid"`
	ClassName    string       `json:"class_name"`
	TypeUID      int          `json:"type_uid"` // class_uid*100 + activity_id
	TypeName     string       `json:"type_name"`
	Time         int64        `json:"time"` // Unix milliseconds
	SeverityID   OCSFSeverity `json:"severity_id"`
	Severity     string       `json:"severity"`
	StatusID     OCSFStatus   `json:"status_id"`
	Status       string       `json:"status"`
	Message      string       `json:"message"`
	Metadata     OCSFMetadata `json:"metadata"`
	Actor        OCSFActor    `json:"actor"`
	Device       *OCSFDevice  `json:"device,omitempty"` // the host exported on, when known
	// Process is the run of a Process Activity; ExitCode its exit status
	// once it ended (activity Terminate).
	Process  *OCSFProcess `json:"process,omitempty"`
	ExitCode *int         `json:"exit_code,omitempty"`
	File     *OCSFFile    `json:"file,omitempty"` // the path of a File System Activity
	Unmapped AuditEvent   `json:"unmapped"`
}

// OCSFClass is an OCSF event class (class_uid).
type OCSFClass int

// The OCSF classes avfs's audit rows map to.
const (
	OCSFBaseEvent          OCSFClass = 0    // Base Event: a row no other class fits (approvals, locks, vault settings, …)
	OCSFFileSystemActivity OCSFClass = 1001 // File System Activity: files, checkpoints, restores
	OCSFProcessActivity    OCSFClass = 1007 // Process Activity: a run's command
)

// OCSFCategory is an OCSF category (category_uid).
type OCSFCategory int

// The OCSF categories of those classes.
const (
	OCSFUncategorized  OCSFCategory = 0 // Base Event's
	OCSFSystemActivity OCSFCategory = 1 // File System and Process Activity's
)

// OCSFActivity is an activity of an OCSF class (activity_id); its
// meaning depends on the class.
type OCSFActivity int

// The activities avfs uses.
const (
	OCSFActivityUnknown       OCSFActivity = 0  // every class: not known
	OCSFActivityLaunch        OCSFActivity = 1  // Process Activity: the run's command started (or was decided about)
	OCSFActivityTerminate     OCSFActivity = 2  // Process Activity: the run's command ended
	OCSFActivityCreate        OCSFActivity = 1  // File System Activity: a file, directory or link was made
	OCSFActivityUpdate        OCSFActivity = 3  // File System Activity: a file's content changed
	OCSFActivityDelete        OCSFActivity = 4  // File System Activity: a file or directory was removed
	OCSFActivityRename        OCSFActivity = 5  // File System Activity: moved
	OCSFActivitySetAttributes OCSFActivity = 6  // File System Activity: mode changed
	OCSFActivityOther         OCSFActivity = 99 // every class: an activity OCSF has no id for (checkpoint.save, …): activity_name says which
)

// OCSFSeverity is an OCSF severity (severity_id).
type OCSFSeverity int

// The severities avfs uses.
const (
	OCSFSeverityInformational OCSFSeverity = 1 // what happened as allowed
	OCSFSeverityLow           OCSFSeverity = 2 // a run that needed approval
	OCSFSeverityMedium        OCSFSeverity = 3 // a run the policy denied
)

// OCSFStatus is an OCSF outcome (status_id).
type OCSFStatus int

// The outcomes.
const (
	OCSFStatusSuccess OCSFStatus = 1 // it happened (a run: allowed and exited 0)
	OCSFStatusFailure OCSFStatus = 2 // a run denied, failed in avfs, or exited non-zero
)

// OCSFMetadata is an OCSF event's metadata.
type OCSFMetadata struct {
	Product OCSFProduct `json:"product"`
	Version string      `json:"version"` // OCSFSchemaVersion
	UID     string      `json:"uid"`     // the row's hash (hex): unique across vaults
	// CorrelationUID is the row's decision_id, when it has one.
	CorrelationUID string `json:"correlation_uid,omitempty"`
	LogName        string `json:"log_name"` // "avfs.audit/VAULT"
}

// OCSFProduct names the product that wrote an event.
type OCSFProduct struct {
	Name       string `json:"name"` // "avfs"
	VendorName string `json:"vendor_name"`
	Version    string `json:"version"` // avfs's version
}

// OCSFActor is who did what an event reports.
type OCSFActor struct {
	User OCSFUser `json:"user"`
}

// OCSFUser is the audit row's actor.
type OCSFUser struct {
	Name string `json:"name"` // the row's actor: cli:USER, serve, mcp, …
}

// OCSFDevice is the host an export was made on.
type OCSFDevice struct {
	Hostname string `json:"hostname"`
	TypeID   int    `json:"type_id"` // 0: unknown
}

// OCSFProcess is the command of a run.
type OCSFProcess struct {
	CmdLine string `json:"cmd_line,omitempty"` // the shell script, or the argv joined with spaces
	UID     string `json:"uid,omitempty"`      // the run's envelope id
}

// OCSFFile is the vault path of a File System Activity.
type OCSFFile struct {
	Name   string `json:"name"` // the last element of path
	Path   string `json:"path"`
	TypeID int    `json:"type_id"` // 0 unknown, 1 regular file, 2 folder, 7 symbolic link
	Type   string `json:"type"`
}
