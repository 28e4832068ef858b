package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"avfs/vault"
)

// floorChunk is the size of the blobs the floor stores: the vault's chunk.
const floorChunk = 64 << 10

// sqliteFloors stores n bytes of distinct data as 64 KiB blobs, keyed by
// their SHA-256 as the vault's chunks table is, in one WAL transaction of
// a fresh database in dir with a new vault's page size (vault.PageSize),
// opened as the vault opens its writer connection (the avfs-sqlite3
// driver, the avfs-wal VFS, synchronous=NORMAL, the vault's cache): Write
// is what SQLite itself needs to store what a 100 MB write through the
// mount stores. The data and its hashes are made before the clock starts.
// Cold is what it needs to read the same chunks back after the kernel's
// caches were dropped, each verified against its SHA-256 as the vault
// verifies what it reads: the floor of a cold sequential read through the
// mount.
func sqliteFloors(ctx context.Context, dir string, n int) (floorResult, error) {
	data, err := floorData(n)
	if err != nil {
		return floorResult{}, err
	}
	return measureFloor(ctx, dir, data, floorSpec{PageSize: vault.PageSize, Reads: true, Verify: true})
}

// floorSet is distinct data and the SHA-256 of each of its 64 KiB chunks.
type floorSet struct {
	data   []byte
	hashes [][32]byte
}

func floorData(n int) (floorSet, error) {
	s := floorSet{data: make([]byte, n), hashes: make([][32]byte, n/floorChunk)}
	if _, err := rand.Read(s.data); err != nil {
		return s, err
	}
	for i := range s.hashes {
		s.hashes[i] = sha256.Sum256(s.data[i*floorChunk : (i+1)*floorChunk])
	}
	return s, nil
}

// floorSpec is how the floor stores its data.
type floorSpec struct {
	PageSize int // the database's page size
	Batch    int // bytes per transaction; 0: all in one
	// Reads also reads the data back, cold (caches dropped) and warm.
	Reads bool
	// Verify checks each chunk read against its SHA-256.
	Verify bool
}

// floorResult is what one floor run measured.
type floorResult struct {
	Write    time.Duration // the transactions
	Close    time.Duration // closing the connection: the last checkpoint
	Cold     time.Duration // reading every chunk back after dropping caches
	Warm     time.Duration // reading them again
	WriteIO  procIO        // this process's I/O during Write and Close
	FileSize int64         // the database file after Close
}

// procIO is the I/O counters of /proc/self/io.
type procIO struct {
	RChar, WChar, SyscR, SyscW, ReadBytes, WriteBytes int64
}

func readProcIO() procIO {
	var p procIO
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return p
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "rchar":
			p.RChar = n
		case "wchar":
			p.WChar = n
		case "syscr":
			p.SyscR = n
		case "syscw":
			p.SyscW = n
		case "read_bytes":
			p.ReadBytes = n
		case "write_bytes":
			p.WriteBytes = n
		}
	}
	return p
}

func (p procIO) sub(q procIO) procIO {
	return procIO{p.RChar - q.RChar, p.WChar - q.WChar, p.SyscR - q.SyscR, p.SyscW - q.SyscW, p.ReadBytes - q.ReadBytes, p.WriteBytes - q.WriteBytes}
}

// floorDSN is the vault's DSN for its writers (write) or readers.
func floorDSN(path string, write bool) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_cache_size", "-16000")
	q.Set("vfs", "avfs-wal")
	if write {
		q.Set("_auto_vacuum", "incremental")
		q.Set("_txlock", "immediate")
	} else {
		q.Set("_query_only", "true")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// measureFloor stores set in a fresh database under dir as spec says.
func measureFloor(ctx context.Context, dir string, set floorSet, spec floorSpec) (floorResult, error) {
	var res floorResult
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp(dir, "floor-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	// Opening a vault registers the avfs-wal VFS.
	v, err := vault.NewStore(filepath.Join(dir, "home"), vault.Options{Actor: "bench"}).Create(ctx, "floor")
	if err != nil {
		return res, err
	}
	v.Close()
	path := filepath.Join(dir, "floor.db")
	// The page size before WAL (as vault.Create does): WAL fixes it.
	pre, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath())
	if err != nil {
		return res, err
	}
	_, err = pre.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d; PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_mode = WAL", spec.PageSize))
	pre.Close()
	if err != nil {
		return res, err
	}
	db, err := sql.Open("avfs-sqlite3", floorDSN(path, true))
	if err != nil {
		return res, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE chunks (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, size INTEGER NOT NULL, data BLOB NOT NULL)"); err != nil {
		return res, err
	}
	per := len(set.hashes)
	if spec.Batch > 0 {
		per = max(spec.Batch/floorChunk, 1)
	}
	io0 := readProcIO()
	start := time.Now()
	for lo := 0; lo < len(set.hashes); lo += per {
		if err := floorTx(ctx, db, set, lo, min(lo+per, len(set.hashes))); err != nil {
			return res, err
		}
	}
	res.Write = time.Since(start)
	start = time.Now()
	if err := db.Close(); err != nil {
		return res, err
	}
	res.Close = time.Since(start)
	res.WriteIO = readProcIO().sub(io0)
	if fi, err := os.Stat(path); err == nil {
		res.FileSize = fi.Size()
	}
	if !spec.Reads {
		return res, nil
	}
	_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
	rdb, err := sql.Open("avfs-sqlite3", floorDSN(path, false))
	if err != nil {
		return res, err
	}
	defer rdb.Close()
	for _, d := range []*time.Duration{&res.Cold, &res.Warm} {
		start := time.Now()
		n, err := floorRead(ctx, rdb, spec.Verify)
		if err != nil {
			return res, err
		}
		if n != int64(len(set.data)) {
			return res, fmt.Errorf("sqlite floor: read %d bytes back, stored %d", n, len(set.data))
		}
		*d = time.Since(start)
	}
	return res, nil
}

// floorTx stores chunks lo to hi of set in one transaction.
func floorTx(ctx context.Context, db *sql.DB, set floorSet, lo, hi int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, "INSERT INTO chunks (hash, size, data) VALUES (?, ?, ?)")
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i := lo; i < hi; i++ {
		if _, err := stmt.ExecContext(ctx, set.hashes[i][:], floorChunk, set.data[i*floorChunk:(i+1)*floorChunk]); err != nil {
			return fmt.Errorf("sqlite floor: %w", err)
		}
	}
	return tx.Commit()
}

// floorRead reads every chunk in id order, one row at a time, as a
// sequential read of a file does, and returns the bytes read. With
// verify, each chunk's SHA-256 must be its hash.
func floorRead(ctx context.Context, db *sql.DB, verify bool) (int64, error) {
	rows, err := db.QueryContext(ctx, "SELECT hash, data FROM chunks ORDER BY id")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	var h, b sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&h, &b); err != nil {
			return n, err
		}
		if sum := sha256.Sum256(b); verify && string(sum[:]) != string(h) {
			return n, fmt.Errorf("sqlite floor: a chunk does not match its hash")
		}
		n += int64(len(b))
	}
	return n, rows.Err()
}
