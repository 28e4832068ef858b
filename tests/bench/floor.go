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
	"time"

	"avfs/vault"
)

// sqliteFloor stores n bytes of distinct data as 64 KiB blobs, keyed by
// their SHA-256 as the vault's chunks table is, in one WAL transaction of
// a fresh database in dir opened as the vault opens its writer connection
// (the avfs-sqlite3 driver, the avfs-wal VFS, synchronous=NORMAL): what
// SQLite itself needs to store what a 100 MB write through the mount
// stores. The data and its hashes are made before the clock starts.
func sqliteFloor(ctx context.Context, dir string, n int) (time.Duration, error) {
	const chunk = 64 << 10
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp(dir, "floor-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	// Opening a vault registers the avfs-wal VFS.
	v, err := vault.NewStore(filepath.Join(dir, "home"), vault.Options{Actor: "bench"}).Create(ctx, "floor")
	if err != nil {
		return 0, err
	}
	v.Close()
	path := filepath.Join(dir, "floor.db")
	data := make([]byte, n)
	if _, err := rand.Read(data); err != nil {
		return 0, err
	}
	hashes := make([][32]byte, n/chunk)
	for i := range hashes {
		hashes[i] = sha256.Sum256(data[i*chunk : (i+1)*chunk])
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_auto_vacuum", "incremental")
	q.Set("_txlock", "immediate")
	q.Set("vfs", "avfs-wal")
	db, err := sql.Open("avfs-sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE chunks (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, size INTEGER NOT NULL, data BLOB NOT NULL)"); err != nil {
		return 0, err
	}
	start := time.Now()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	stmt, err := tx.PrepareContext(ctx, "INSERT INTO chunks (hash, size, data) VALUES (?, ?, ?)")
	if err != nil {
		tx.Rollback()
		return 0, err
	}
	for i, h := range hashes {
		if _, err := stmt.ExecContext(ctx, h[:], chunk, data[i*chunk:(i+1)*chunk]); err != nil {
			tx.Rollback()
			return 0, fmt.Errorf("sqlite floor: %w", err)
		}
	}
	stmt.Close()
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
