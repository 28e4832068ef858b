// avfs-wal: a SQLite VFS over the default one that gathers the frames a
// transaction appends to a write-ahead log and writes them with one
// pwrite at commit, instead of two writes per page. See walvfs.go.
//
// The declarations below are SQLite's public, stable VFS ABI (sqlite3.h);
// the functions are those of the SQLite that github.com/mattn/go-sqlite3
// links into the binary.

#include <stdlib.h>
#include <string.h>

typedef long long sqlite3_int64;
typedef struct sqlite3_file sqlite3_file;
typedef struct sqlite3_io_methods sqlite3_io_methods;
typedef struct sqlite3_vfs sqlite3_vfs;
typedef void (*sqlite3_syscall_ptr)(void);

struct sqlite3_file {
	const sqlite3_io_methods *pMethods;
};

struct sqlite3_io_methods {
	int iVersion;
	int (*xClose)(sqlite3_file *);
	int (*xRead)(sqlite3_file *, void *, int iAmt, sqlite3_int64 iOfst);
	int (*xWrite)(sqlite3_file *, const void *, int iAmt, sqlite3_int64 iOfst);
	int (*xTruncate)(sqlite3_file *, sqlite3_int64 size);
	int (*xSync)(sqlite3_file *, int flags);
	int (*xFileSize)(sqlite3_file *, sqlite3_int64 *pSize);
	int (*xLock)(sqlite3_file *, int);
	int (*xUnlock)(sqlite3_file *, int);
	int (*xCheckReservedLock)(sqlite3_file *, int *pResOut);
	int (*xFileControl)(sqlite3_file *, int op, void *pArg);
	int (*xSectorSize)(sqlite3_file *);
	int (*xDeviceCharacteristics)(sqlite3_file *);
	int (*xShmMap)(sqlite3_file *, int iPg, int pgsz, int, void volatile **);
	int (*xShmLock)(sqlite3_file *, int offset, int n, int flags);
	void (*xShmBarrier)(sqlite3_file *);
	int (*xShmUnmap)(sqlite3_file *, int deleteFlag);
	int (*xFetch)(sqlite3_file *, sqlite3_int64 iOfst, int iAmt, void **pp);
	int (*xUnfetch)(sqlite3_file *, sqlite3_int64 iOfst, void *p);
};

struct sqlite3_vfs {
	int iVersion;
	int szOsFile;
	int mxPathname;
	sqlite3_vfs *pNext;
	const char *zName;
	void *pAppData;
	int (*xOpen)(sqlite3_vfs *, const char *zName, sqlite3_file *, int flags, int *pOutFlags);
	int (*xDelete)(sqlite3_vfs *, const char *zName, int syncDir);
	int (*xAccess)(sqlite3_vfs *, const char *zName, int flags, int *pResOut);
	int (*xFullPathname)(sqlite3_vfs *, const char *zName, int nOut, char *zOut);
	void *(*xDlOpen)(sqlite3_vfs *, const char *zFilename);
	void (*xDlError)(sqlite3_vfs *, int nByte, char *zErrMsg);
	void (*(*xDlSym)(sqlite3_vfs *, void *, const char *zSymbol))(void);
	void (*xDlClose)(sqlite3_vfs *, void *);
	int (*xRandomness)(sqlite3_vfs *, int nByte, char *zOut);
	int (*xSleep)(sqlite3_vfs *, int microseconds);
	int (*xCurrentTime)(sqlite3_vfs *, double *);
	int (*xGetLastError)(sqlite3_vfs *, int, char *);
	int (*xCurrentTimeInt64)(sqlite3_vfs *, sqlite3_int64 *);
	int (*xSetSystemCall)(sqlite3_vfs *, const char *zName, sqlite3_syscall_ptr);
	sqlite3_syscall_ptr (*xGetSystemCall)(sqlite3_vfs *, const char *zName);
	const char *(*xNextSystemCall)(sqlite3_vfs *, const char *zName);
};

extern sqlite3_vfs *sqlite3_vfs_find(const char *zVfsName);
extern int sqlite3_vfs_register(sqlite3_vfs *, int makeDflt);
extern sqlite3_file *sqlite3_database_file_object(const char *);

#define SQLITE_OK 0
#define SQLITE_NOMEM 7
#define SQLITE_OPEN_MAIN_DB 0x00000100
#define SQLITE_OPEN_WAL 0x00080000
#define SQLITE_SHM_UNLOCK 1

// walBufMax bounds the frames held: past it they are written out.
#define walBufMax (1 << 20)
// walWriteMax is the most the unix VFS writes in one call (it masks the
// length of a write with 0x1ffff).
#define walWriteMax (1 << 16)
// A frame header is 24 bytes; bytes 4-7 hold the database size after a
// commit frame, 0 in every other frame.
#define walFrameHdr 24

typedef struct shimFile shimFile;
struct shimFile {
	sqlite3_file base;
	sqlite3_file *real; // the default VFS's file, right after this struct
	shimFile *db;       // a log: its database; a database: its open log (or NULL)
	shimFile *wal;
	// A log's gathered writes: len bytes for the file at off.
	char *buf;
	int len;
	sqlite3_int64 off;
	int commitNext; // the next write is the page of a commit frame
};

static sqlite3_vfs *root;
static sqlite3_vfs walvfs;
static sqlite3_io_methods dbMethods, walMethods;

// walFlush writes out the gathered frames, in writes of at most
// walWriteMax bytes: the unix VFS takes no more in one call.
static int walFlush(shimFile *p) {
	int rc = SQLITE_OK;
	for (int done = 0; done < p->len && rc == SQLITE_OK; done += walWriteMax) {
		int n = p->len - done;
		if (n > walWriteMax) {
			n = walWriteMax;
		}
		rc = p->real->pMethods->xWrite(p->real, p->buf + done, n, p->off + done);
	}
	p->len = 0;
	return rc;
}

// walWriteThrough writes data at off without gathering it.
static int walWriteThrough(shimFile *p, const void *data, int n, sqlite3_int64 off) {
	int rc = SQLITE_OK;
	for (int done = 0; done < n && rc == SQLITE_OK; done += walWriteMax) {
		int k = n - done < walWriteMax ? n - done : walWriteMax;
		rc = p->real->pMethods->xWrite(p->real, (const char *)data + done, k, off + done);
	}
	return rc;
}

static int walWrite(sqlite3_file *f, const void *data, int n, sqlite3_int64 off) {
	shimFile *p = (shimFile *)f;
	int commit = p->commitNext;
	p->commitNext = 0;
	if (p->len > 0 && off != p->off + p->len) {
		int rc = walFlush(p);
		if (rc != SQLITE_OK) {
			return rc;
		}
	}
	if (n > walBufMax || (p->len > 0 && p->len + n > walBufMax)) {
		int rc = walFlush(p);
		if (rc != SQLITE_OK) {
			return rc;
		}
		if (n > walBufMax) {
			return walWriteThrough(p, data, n, off);
		}
	}
	if (p->buf == NULL) {
		p->buf = malloc(walBufMax);
		if (p->buf == NULL) {
			return walWriteThrough(p, data, n, off);
		}
	}
	if (p->len == 0) {
		p->off = off;
	}
	memcpy(p->buf + p->len, data, n);
	p->len += n;
	if (n == walFrameHdr && off >= 32) {
		const unsigned char *h = data;
		p->commitNext = (h[4] | h[5] | h[6] | h[7]) != 0;
	} else if (commit) {
		// The commit frame is complete: the transaction's frames go to
		// the file now, so that a failure fails the commit.
		return walFlush(p);
	}
	return SQLITE_OK;
}

static int walClose(sqlite3_file *f) {
	shimFile *p = (shimFile *)f;
	int rc = walFlush(p);
	if (p->db != NULL && p->db->wal == p) {
		p->db->wal = NULL;
	}
	free(p->buf);
	p->buf = NULL;
	int rc2 = p->real->pMethods->xClose(p->real);
	return rc != SQLITE_OK ? rc : rc2;
}

static int walRead(sqlite3_file *f, void *data, int n, sqlite3_int64 off) {
	shimFile *p = (shimFile *)f;
	int rc = walFlush(p);
	return rc != SQLITE_OK ? rc : p->real->pMethods->xRead(p->real, data, n, off);
}

static int walTruncate(sqlite3_file *f, sqlite3_int64 size) {
	shimFile *p = (shimFile *)f;
	int rc = walFlush(p);
	return rc != SQLITE_OK ? rc : p->real->pMethods->xTruncate(p->real, size);
}

static int walSync(sqlite3_file *f, int flags) {
	shimFile *p = (shimFile *)f;
	int rc = walFlush(p);
	return rc != SQLITE_OK ? rc : p->real->pMethods->xSync(p->real, flags);
}

static int walFileSize(sqlite3_file *f, sqlite3_int64 *size) {
	shimFile *p = (shimFile *)f;
	int rc = walFlush(p);
	return rc != SQLITE_OK ? rc : p->real->pMethods->xFileSize(p->real, size);
}

static int walFileControl(sqlite3_file *f, int op, void *arg) {
	shimFile *p = (shimFile *)f;
	int rc = walFlush(p);
	return rc != SQLITE_OK ? rc : p->real->pMethods->xFileControl(p->real, op, arg);
}

// The remaining methods of both kinds of file pass through.
static sqlite3_file *realOf(sqlite3_file *f) { return ((shimFile *)f)->real; }
static int passLock(sqlite3_file *f, int l) { return realOf(f)->pMethods->xLock(realOf(f), l); }
static int passUnlock(sqlite3_file *f, int l) { return realOf(f)->pMethods->xUnlock(realOf(f), l); }
static int passCheckReservedLock(sqlite3_file *f, int *out) { return realOf(f)->pMethods->xCheckReservedLock(realOf(f), out); }
static int passSectorSize(sqlite3_file *f) { return realOf(f)->pMethods->xSectorSize(realOf(f)); }
static int passDeviceCharacteristics(sqlite3_file *f) { return realOf(f)->pMethods->xDeviceCharacteristics(realOf(f)); }
static int passRead(sqlite3_file *f, void *d, int n, sqlite3_int64 o) { return realOf(f)->pMethods->xRead(realOf(f), d, n, o); }
static int passWrite(sqlite3_file *f, const void *d, int n, sqlite3_int64 o) { return realOf(f)->pMethods->xWrite(realOf(f), d, n, o); }
static int passTruncate(sqlite3_file *f, sqlite3_int64 s) { return realOf(f)->pMethods->xTruncate(realOf(f), s); }
static int passSync(sqlite3_file *f, int fl) { return realOf(f)->pMethods->xSync(realOf(f), fl); }
static int passFileSize(sqlite3_file *f, sqlite3_int64 *s) { return realOf(f)->pMethods->xFileSize(realOf(f), s); }
static int passFileControl(sqlite3_file *f, int op, void *a) { return realOf(f)->pMethods->xFileControl(realOf(f), op, a); }
static int passShmMap(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp) { return realOf(f)->pMethods->xShmMap(realOf(f), pg, sz, ext, pp); }
static int passFetch(sqlite3_file *f, sqlite3_int64 o, int n, void **pp) { return realOf(f)->pMethods->xFetch(realOf(f), o, n, pp); }
static int passUnfetch(sqlite3_file *f, sqlite3_int64 o, void *pp) { return realOf(f)->pMethods->xUnfetch(realOf(f), o, pp); }

// The database's shared-memory calls write out its log's frames first:
// a barrier comes before the log's new header is published, and an
// unlock at the end of a transaction; after either, other connections may
// read the frames from the file.
static int dbShmLock(sqlite3_file *f, int ofs, int n, int flags) {
	shimFile *p = (shimFile *)f;
	if ((flags & SQLITE_SHM_UNLOCK) && p->wal != NULL) {
		int rc = walFlush(p->wal);
		if (rc != SQLITE_OK) {
			return rc;
		}
	}
	return p->real->pMethods->xShmLock(p->real, ofs, n, flags);
}

static void dbShmBarrier(sqlite3_file *f) {
	shimFile *p = (shimFile *)f;
	if (p->wal != NULL) {
		walFlush(p->wal); // commits flush in walWrite, where errors can be returned
	}
	p->real->pMethods->xShmBarrier(p->real);
}

static int dbShmUnmap(sqlite3_file *f, int del) {
	shimFile *p = (shimFile *)f;
	if (p->wal != NULL) {
		int rc = walFlush(p->wal);
		if (rc != SQLITE_OK) {
			return rc;
		}
	}
	return p->real->pMethods->xShmUnmap(p->real, del);
}

static int dbClose(sqlite3_file *f) {
	shimFile *p = (shimFile *)f;
	if (p->wal != NULL) {
		p->wal->db = NULL;
		p->wal = NULL;
	}
	return p->real->pMethods->xClose(p->real);
}

static int shimOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
	if (!(flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL))) {
		// Journals and temporary files: the default VFS's file, as is.
		return root->xOpen(root, name, f, flags, outFlags);
	}
	shimFile *p = (shimFile *)f;
	memset(p, 0, sizeof(*p));
	p->real = (sqlite3_file *)&p[1];
	int rc = root->xOpen(root, name, p->real, flags, outFlags);
	if (rc != SQLITE_OK) {
		return rc;
	}
	if (flags & SQLITE_OPEN_MAIN_DB) {
		p->base.pMethods = &dbMethods;
		return SQLITE_OK;
	}
	p->base.pMethods = &walMethods;
	sqlite3_file *db = sqlite3_database_file_object(name);
	if (db != NULL && db->pMethods == &dbMethods) {
		p->db = (shimFile *)db;
		p->db->wal = p;
	}
	return SQLITE_OK;
}

static int shimDelete(sqlite3_vfs *v, const char *n, int s) { return root->xDelete(root, n, s); }
static int shimAccess(sqlite3_vfs *v, const char *n, int fl, int *o) { return root->xAccess(root, n, fl, o); }
static int shimFullPathname(sqlite3_vfs *v, const char *n, int no, char *o) { return root->xFullPathname(root, n, no, o); }
static void *shimDlOpen(sqlite3_vfs *v, const char *n) { return root->xDlOpen(root, n); }
static void shimDlError(sqlite3_vfs *v, int n, char *m) { root->xDlError(root, n, m); }
static void (*shimDlSym(sqlite3_vfs *v, void *h, const char *s))(void) { return root->xDlSym(root, h, s); }
static void shimDlClose(sqlite3_vfs *v, void *h) { root->xDlClose(root, h); }
static int shimRandomness(sqlite3_vfs *v, int n, char *o) { return root->xRandomness(root, n, o); }
static int shimSleep(sqlite3_vfs *v, int us) { return root->xSleep(root, us); }
static int shimCurrentTime(sqlite3_vfs *v, double *t) { return root->xCurrentTime(root, t); }
static int shimGetLastError(sqlite3_vfs *v, int n, char *o) { return root->xGetLastError(root, n, o); }
static int shimCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *t) { return root->xCurrentTimeInt64(root, t); }

// avfs_walvfs_register registers the VFS named name over the default one;
// it returns 0 on success.
int avfs_walvfs_register(const char *name) {
	root = sqlite3_vfs_find(NULL);
	if (root == NULL || root->iVersion < 2) {
		return -1;
	}
	dbMethods = (sqlite3_io_methods){
		.iVersion = 3,
		.xClose = dbClose,
		.xRead = passRead,
		.xWrite = passWrite,
		.xTruncate = passTruncate,
		.xSync = passSync,
		.xFileSize = passFileSize,
		.xLock = passLock,
		.xUnlock = passUnlock,
		.xCheckReservedLock = passCheckReservedLock,
		.xFileControl = passFileControl,
		.xSectorSize = passSectorSize,
		.xDeviceCharacteristics = passDeviceCharacteristics,
		.xShmMap = passShmMap,
		.xShmLock = dbShmLock,
		.xShmBarrier = dbShmBarrier,
		.xShmUnmap = dbShmUnmap,
		.xFetch = passFetch,
		.xUnfetch = passUnfetch,
	};
	walMethods = (sqlite3_io_methods){
		.iVersion = 1,
		.xClose = walClose,
		.xRead = walRead,
		.xWrite = walWrite,
		.xTruncate = walTruncate,
		.xSync = walSync,
		.xFileSize = walFileSize,
		.xLock = passLock,
		.xUnlock = passUnlock,
		.xCheckReservedLock = passCheckReservedLock,
		.xFileControl = walFileControl,
		.xSectorSize = passSectorSize,
		.xDeviceCharacteristics = passDeviceCharacteristics,
	};
	walvfs = (sqlite3_vfs){
		.iVersion = 2,
		.szOsFile = (int)sizeof(shimFile) + root->szOsFile,
		.mxPathname = root->mxPathname,
		.zName = name,
		.xOpen = shimOpen,
		.xDelete = shimDelete,
		.xAccess = shimAccess,
		.xFullPathname = shimFullPathname,
		.xDlOpen = shimDlOpen,
		.xDlError = shimDlError,
		.xDlSym = shimDlSym,
		.xDlClose = shimDlClose,
		.xRandomness = shimRandomness,
		.xSleep = shimSleep,
		.xCurrentTime = shimCurrentTime,
		.xGetLastError = shimGetLastError,
		.xCurrentTimeInt64 = shimCurrentTimeInt64,
	};
	return sqlite3_vfs_register(&walvfs, 0);
}
