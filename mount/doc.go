// Package mount serves a vault as a real directory over FUSE (go-fuse v2),
// so that ordinary tools work in it as on a local disk and every byte they
// write lands in the vault.
//
// Writes are buffered per open file in whole chunks (spilled to a temporary
// file beyond a threshold) and committed by flush/fsync/close in one vault
// transaction, so a killed mount loses at most what applications had not
// flushed and never corrupts the vault. Quota failures reach the writer as
// EDQUOT on write, close or fsync, with the data kept.
//
// The process that serves a mount must not itself start programs whose
// working directory or binary is on it (see go-fuse's "Deadlocks"): avfs
// serves mounts from a separate process of its own binary (`avfs mount`).
package mount
