// Package mount serves a vault as a real directory over FUSE (go-fuse v2),
// so that ordinary tools work in it as on a local disk and every byte they
// write lands in the vault.
//
// Writes are buffered per open file in whole chunks; a chunk that fills
// is stored in the vault at once, staged (see stager), and the rest is
// held in memory (spilled to a temporary file beyond a threshold) until
// flush/fsync/close commits the file in one vault transaction, so a killed
// mount loses at most what applications had not flushed and never
// corrupts the vault. One account of the mount's
// unflushed writes (buffers) refuses at write(2) what would cross the
// vault's quotas (EDQUOT) or fill the spill directory (ENOSPC); a quota
// crossed anyway fails close or fsync with EDQUOT, with the data kept.
//
// The process that serves a mount must not touch it between fork and exec
// of a child (see go-fuse's "Deadlocks"): avfs proxy exec, which serves the
// run's mount itself, forks the command from a thread already in the mount,
// or through /bin/sh, which changes into the mount after the exec, when the
// program is on the mount (runner.ProcSpec.DirServed). Every /dev/fuse
// descriptor is close-on-exec, so no child holds the FUSE connection.
package mount
