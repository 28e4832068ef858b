// Package vault stores a workspace in a single SQLite file: POSIX-shaped
// inodes and directory entries, file content in content-addressed 64 KiB
// chunks, checkpoints, forks that borrow their parent's chunks, per-file
// history, quotas, and a hash-chained audit log.
//
// Every mutation runs in one BEGIN IMMEDIATE transaction that also checks the
// quotas, records history and appends the audit row, so several processes
// can share a vault and a failed or interrupted write changes nothing.
//
// Metadata rows are versioned by generation (gen_from, gen_to): saving a
// checkpoint records the current generation and starts a new one (O(1));
// restoring reinstates the rows visible at that generation (O(changes)).
// docs/vault.md describes the design in full.
package vault
