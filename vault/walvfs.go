package vault

/*
int avfs_walvfs_register(const char *name);
*/
import "C"

import (
	"fmt"
	"sync"
)

// walVFS is the SQLite VFS every vault connection uses: the default one,
// except that the frames a transaction appends to the write-ahead log are
// gathered in memory and written with one pwrite when the commit frame is
// complete (walvfs.c). SQLite writes each frame as two writes, header and
// page, so a commit that changes nine pages made eighteen system calls,
// which on some virtual machines cost more than the rest of the
// transaction.
//
// What other connections and processes see is unchanged: the frames are
// in the file before the commit's write returns, so before SQLite
// publishes the new log header in shared memory, and any read, sync,
// truncation or size query of the log writes out what is gathered first.
// A failed write fails the commit, as it did before. The file format is
// SQLite's own: any SQLite (the sqlite3 shell included) can open a vault.
const walVFS = "avfs-wal"

var (
	walVFSOnce sync.Once
	walVFSErr  error
)

// registerWALVFS registers walVFS with SQLite, once, when the first vault
// is opened: a process that opens none (avfs --help) does not start
// SQLite.
func registerWALVFS() error {
	walVFSOnce.Do(func() {
		name := C.CString(walVFS) // kept for the life of the process, as SQLite requires
		if rc := C.avfs_walvfs_register(name); rc != 0 {
			walVFSErr = fmt.Errorf("register SQLite VFS %s: error %d", walVFS, rc)
		}
	})
	return walVFSErr
}
