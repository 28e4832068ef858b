package vault

// schemaVersion is the version of the on-disk schema, stored in PRAGMA
// user_version. Opening a vault of an older version migrates it (see
// migrations); a newer one is vault_unreadable (schema_too_new).
//
// Version 2 keys the audit chain: audit.mac, and the chain head each
// checkpoint recorded (checkpoints.audit_id, audit_hash, audit_mac).
// Version 3 bounds history: the stored bytes of all chunks
// (state.chunk_bytes, kept by every transaction that adds or removes
// chunks), when retention next runs (retain_at) and the vault's retention
// settings (keep_versions, keep_age_s, history_pct, history_min_mb;
// see Retention).
// Version 4 adds the staged table: chunks a writer stored ahead of the
// commit that refers to them (see StageChunks).
// Version 5 records decisions: the decisions table and its limits
// (state.decisions_max, decisions_max_age_s), all in decisionsSQL.
const schemaVersion = 5

// migrations[v] turns a vault of schema version v into one of version
// v+1. They run in order, in one write transaction, when a vault of an
// older version is opened (see migrate). Each only adds: rows written
// before it keep their meaning (an audit row without a MAC is unanchored,
// a checkpoint without a head recorded none).
var migrations = map[int32]string{
	1: `
ALTER TABLE audit ADD COLUMN mac BLOB NOT NULL DEFAULT x'';
ALTER TABLE checkpoints ADD COLUMN audit_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN audit_hash BLOB NOT NULL DEFAULT x'';
ALTER TABLE checkpoints ADD COLUMN audit_mac BLOB NOT NULL DEFAULT x'';
`,
	2: `
ALTER TABLE state ADD COLUMN chunk_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE state ADD COLUMN retain_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE state ADD COLUMN keep_versions INTEGER NOT NULL DEFAULT ` + defaultKeepVersions + `;
ALTER TABLE state ADD COLUMN keep_age_s INTEGER NOT NULL DEFAULT ` + defaultKeepAgeS + `;
ALTER TABLE state ADD COLUMN history_pct INTEGER NOT NULL DEFAULT ` + defaultHistoryPct + `;
ALTER TABLE state ADD COLUMN history_min_mb INTEGER NOT NULL DEFAULT ` + defaultHistoryMinMB + `;
UPDATE state SET chunk_bytes = (SELECT COALESCE(SUM(size), 0) FROM chunks);
`,
	3: stagedSQL,
	4: decisionsSQL,
}

// stagedSQL creates the staged table (schema version 4): one row per
// chunk a writer stored ahead of its commit (see StageChunks), which
// retention and gc count as referenced.
const stagedSQL = `
CREATE TABLE staged (
	pid   INTEGER NOT NULL,
	host  TEXT    NOT NULL,
	owner INTEGER NOT NULL, -- the writer (an open file) within the process
	epoch INTEGER NOT NULL, -- the owner's commits so far when staged
	hash  BLOB    NOT NULL,
	PRIMARY KEY (pid, host, owner, epoch, hash)
) WITHOUT ROWID;
`

// live is gen_to of rows that are part of the current state.
const live = int64(9223372036854775807)

// liveSQL is live written into queries as a literal, so that SQLite can use
// the partial indexes on live rows (it cannot for a bound parameter).
const liveSQL = "9223372036854775807"

// rootIno is the inode number of the root directory.
const rootIno = 1

// ChunkSize is the size of a content chunk. All chunks of a file but the
// last span ChunkSize bytes; a chunk's stored data may be shorter than its
// span, the rest reading as zeros.
const ChunkSize = 64 * 1024

const schemaSQL = `
CREATE TABLE state (
	id             INTEGER PRIMARY KEY CHECK (id = 1),
	uuid           TEXT    NOT NULL,
	name           TEXT    NOT NULL,
	created_ns     INTEGER NOT NULL,
	gen            INTEGER NOT NULL,
	next_ino       INTEGER NOT NULL,
	files          INTEGER NOT NULL,
	bytes          INTEGER NOT NULL,
	max_bytes      INTEGER NOT NULL DEFAULT 0,
	max_files      INTEGER NOT NULL DEFAULT 0,
	max_file_bytes INTEGER NOT NULL DEFAULT 0,
	parent_name    TEXT    NOT NULL DEFAULT '',
	parent_uuid    TEXT    NOT NULL DEFAULT '',
	parent_gen     INTEGER NOT NULL DEFAULT 0,
	forked_ns      INTEGER NOT NULL DEFAULT 0,
	audit_id       INTEGER NOT NULL DEFAULT 0,   -- the audit chain's head: last row id
	audit_hash     BLOB    NOT NULL DEFAULT x'', -- and its hash (so removing the tail is detected)
	dir_epoch      INTEGER NOT NULL DEFAULT 0,   -- changes whenever a directory's path may have changed
	chunk_bytes    INTEGER NOT NULL DEFAULT 0,   -- stored bytes of all chunks
	retain_at      INTEGER NOT NULL DEFAULT 0,   -- retention runs once chunk_bytes reaches this
	keep_versions  INTEGER NOT NULL DEFAULT ` + defaultKeepVersions + `,
	keep_age_s     INTEGER NOT NULL DEFAULT ` + defaultKeepAgeS + `,
	history_pct    INTEGER NOT NULL DEFAULT ` + defaultHistoryPct + `,
	history_min_mb INTEGER NOT NULL DEFAULT ` + defaultHistoryMinMB + `
);

CREATE TABLE inodes (
	ino      INTEGER NOT NULL,
	gen_from INTEGER NOT NULL,
	gen_to   INTEGER NOT NULL DEFAULT 9223372036854775807,
	kind     INTEGER NOT NULL,
	mode     INTEGER NOT NULL,
	uid      INTEGER NOT NULL,
	gid      INTEGER NOT NULL,
	size     INTEGER NOT NULL,
	nlink    INTEGER NOT NULL,
	mtime_ns INTEGER NOT NULL,
	ctime_ns INTEGER NOT NULL,
	atime_ns INTEGER NOT NULL,
	target   TEXT    NOT NULL DEFAULT '',
	chunks   BLOB    NOT NULL DEFAULT x'',
	xattrs   BLOB    NOT NULL DEFAULT x'',
	PRIMARY KEY (ino, gen_from)
);

CREATE TABLE dentries (
	parent   INTEGER NOT NULL,
	name     TEXT    NOT NULL,
	gen_from INTEGER NOT NULL,
	gen_to   INTEGER NOT NULL DEFAULT 9223372036854775807,
	ino      INTEGER NOT NULL,
	PRIMARY KEY (parent, name, gen_from)
) WITHOUT ROWID;

CREATE TABLE chunks (
	id   INTEGER PRIMARY KEY,
	hash BLOB    NOT NULL UNIQUE,
	size INTEGER NOT NULL,
	data BLOB    NOT NULL
);

CREATE TABLE checkpoints (
	id          INTEGER PRIMARY KEY,
	name        TEXT UNIQUE,
	description TEXT    NOT NULL DEFAULT '',
	gen         INTEGER NOT NULL UNIQUE,
	created_ns  INTEGER NOT NULL,
	files       INTEGER NOT NULL,
	bytes       INTEGER NOT NULL,
	audit_id    INTEGER NOT NULL DEFAULT 0,   -- the audit chain's head when the checkpoint was taken: last row id
	audit_hash  BLOB    NOT NULL DEFAULT x'', -- its hash
	audit_mac   BLOB    NOT NULL DEFAULT x''  -- and its MAC (x'' when it had none)
);

CREATE TABLE versions (
	ino     INTEGER NOT NULL,
	n       INTEGER NOT NULL,
	path    TEXT    NOT NULL,
	op      TEXT    NOT NULL,
	time_ns INTEGER NOT NULL,
	kind    INTEGER NOT NULL,
	mode    INTEGER NOT NULL,
	size    INTEGER NOT NULL,
	target  TEXT    NOT NULL DEFAULT '',
	chunks  BLOB    NOT NULL DEFAULT x'',
	PRIMARY KEY (ino, n)
) WITHOUT ROWID;

CREATE TABLE audit (
	id        INTEGER PRIMARY KEY,
	time_ns   INTEGER NOT NULL,
	op        TEXT    NOT NULL,
	path      TEXT    NOT NULL,
	details   TEXT    NOT NULL,
	actor     TEXT    NOT NULL,
	prev_hash BLOB    NOT NULL,
	hash      BLOB    NOT NULL,
	mac       BLOB    NOT NULL DEFAULT x'' -- HMAC-SHA256(audit key, hash); x'' when written without a key
);

-- locks records who holds the vault beyond one transaction: the writer
-- mount ("mount"), with its process, so that a second writer mount and a
-- restore under a live mount are refused.
CREATE TABLE locks (
	name     TEXT PRIMARY KEY,
	pid      INTEGER NOT NULL,
	host     TEXT    NOT NULL,
	since_ns INTEGER NOT NULL,
	info     TEXT    NOT NULL DEFAULT ''
);

-- marks pin a generation for a while, like an unnamed checkpoint that
-- nobody restores: a run records one to list what it changed.
CREATE TABLE marks (
	id         INTEGER PRIMARY KEY,
	gen        INTEGER NOT NULL,
	created_ns INTEGER NOT NULL,
	purpose    TEXT    NOT NULL DEFAULT ''
);

-- approvals holds requests to run a command that the policy sent for
-- approval, bound to a digest of exactly what would run.
CREATE TABLE approvals (
	id          TEXT PRIMARY KEY,
	status      TEXT    NOT NULL,  -- pending, granted, denied, used
	created_ns  INTEGER NOT NULL,
	expires_ns  INTEGER NOT NULL,
	digest      TEXT    NOT NULL,
	request     TEXT    NOT NULL,  -- JSON: argv, shell, cwd, vault, bundle revision, reasons
	reason      TEXT    NOT NULL DEFAULT '',
	decided_by  TEXT    NOT NULL DEFAULT '',
	decided_ns  INTEGER NOT NULL DEFAULT 0,
	grant_mac   TEXT    NOT NULL DEFAULT '',
	used_ns     INTEGER NOT NULL DEFAULT 0,
	exec_id     TEXT    NOT NULL DEFAULT ''
);

-- forks lists the live forks that borrow chunks from this vault.
CREATE TABLE forks (
	uuid       TEXT PRIMARY KEY,
	name       TEXT    NOT NULL,
	gen        INTEGER NOT NULL,
	created_ns INTEGER NOT NULL
);
` + stagedSQL + decisionsSQL

// indexSQL creates the indexes; a fork creates them after its bulk copy.
// Live rows are found through the primary keys ((ino, gen_from) and
// (parent, name, gen_from)): a key has few generations. That at most one
// row per key is live is kept by the write transactions and checked by
// vault check, not by an index, so that writes and forks maintain fewer.
// Queries for rows changed after a generation g always hold g >= 1, so the
// gen_from indexes leave out generation 1, the bulk of a new fork.
const indexSQL = `
CREATE INDEX inodes_gen_from ON inodes(gen_from) WHERE gen_from > 1;
CREATE INDEX inodes_gen_to ON inodes(gen_to) WHERE gen_to < 9223372036854775807;
CREATE INDEX dentries_ino ON dentries(ino, gen_to);
CREATE INDEX dentries_gen_from ON dentries(gen_from) WHERE gen_from > 1;
CREATE INDEX dentries_gen_to ON dentries(gen_to) WHERE gen_to < 9223372036854775807;
CREATE INDEX versions_deleted ON versions(path) WHERE op = 'delete';
`
