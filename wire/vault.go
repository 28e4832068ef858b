package wire

import (
	"encoding/json"
	"time"
)

// VaultInfo describes a vault: what `avfs vault info`, `vault create`,
// `vault fork` and `vault detach` print, and each readable entry of `vault
// list` (vault.Info is this type).
type VaultInfo struct {
	Name        string          `json:"name"`
	UUID        string          `json:"uuid"`
	Path        string          `json:"path"`
	CreatedAt   time.Time       `json:"created_at"`
	Files       int64           `json:"files"`
	Bytes       int64           `json:"bytes"`
	FileSize    int64           `json:"file_size"` // bytes the vault file (with its WAL) takes on disk
	Quota       VaultQuota      `json:"quota"`
	Parent      *VaultForkPoint `json:"parent"` // nil unless the vault is a fork
	Forks       []VaultForkRef  `json:"forks"`  // live forks that borrow from this vault
	Checkpoints int64           `json:"checkpoints"`
	Generation  int64           `json:"generation"`
}

// VaultQuota are a vault's limits; 0 means unlimited (vault.Quota is this
// type).
type VaultQuota struct {
	MaxSizeMB     int64 `json:"max_size_mb"`      // logical bytes of live files
	MaxFiles      int64 `json:"max_files"`        // inodes other than the root: files, directories, symlinks
	MaxFileSizeMB int64 `json:"max_file_size_mb"` // size of one file
}

// VaultForkPoint is where a fork branched off its parent.
type VaultForkPoint struct {
	Name       string    `json:"name"`
	UUID       string    `json:"uuid"`
	Generation int64     `json:"generation"`
	ForkedAt   time.Time `json:"forked_at"`
}

// VaultForkRef is a live fork of a vault.
type VaultForkRef struct {
	Name      string    `json:"name"`
	UUID      string    `json:"uuid"`
	CreatedAt time.Time `json:"created_at"`
}

// VaultFault says why a file in the vaults directory cannot be opened as a
// vault: the reason detail of a vault_unreadable error.
type VaultFault string

// Vault faults.
const (
	VaultEmpty        VaultFault = "empty"            // the file is zero bytes long
	VaultNotSQLite    VaultFault = "not_sqlite"       // the file is not an SQLite database (no SQLite header)
	VaultDamaged      VaultFault = "damaged"          // an SQLite file that is truncated or corrupt
	VaultNotAVFS      VaultFault = "not_avfs"         // a valid SQLite database that is not an avfs vault
	VaultSchemaTooNew VaultFault = "schema_too_new"   // a vault of a newer avfs: schema_version is above supported_schema_version
	VaultNotRegular   VaultFault = "not_regular"      // not a regular file (a FIFO, socket or device)
	VaultDanglingLink VaultFault = "dangling_symlink" // a symbolic link to nothing
)

// VaultListKind is the kind of a VaultList document.
const VaultListKind = "vault_list"

// VaultList is what `avfs --json vault list` prints: every vault of the
// state directory, sorted by name, the ones that cannot be read among
// them.
type VaultList struct {
	Kind    string           `json:"kind"`    // "vault_list"
	Current string           `json:"current"` // the current vault's name (it may not exist yet)
	Vaults  []VaultListEntry `json:"vaults"`  // never null
}

// VaultListEntry is one vault of a VaultList. A vault that can be read is
// its VaultInfo, with no error field. One that cannot has only name, path
// and error: the error object of any failed command (code
// vault_unreadable with reason, a VaultFault, when the file is not a
// vault this avfs can open; host_io or vault_busy when reading it failed).
type VaultListEntry struct {
	VaultInfo
	Error *ErrorBody `json:"error,omitempty"`
}

// MarshalJSON writes a readable entry as its VaultInfo, and an unreadable
// one as name, path and error.
func (e VaultListEntry) MarshalJSON() ([]byte, error) {
	if e.Error == nil {
		return json.Marshal(e.VaultInfo)
	}
	return json.Marshal(struct {
		Name  string     `json:"name"`
		Path  string     `json:"path"`
		Error *ErrorBody `json:"error"`
	}{e.Name, e.Path, e.Error})
}
