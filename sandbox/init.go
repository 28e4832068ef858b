package sandbox

// The init (init.c) runs from a C constructor, before the Go runtime, in
// every process of this binary whose environment has initEnv: importing
// this package is what links it in.

/*
#cgo CFLAGS: -Wall -Wno-unused-result
*/
import "C"

// initEnv marks the process avfs starts as a sandbox's init.
const initEnv = "_AVFS_SANDBOX_INIT=1"

// nsEnv asks that process to make the run's namespaces first, with
// "UID GID NET" (see init.c's launch).
const nsEnv = "_AVFS_SANDBOX_NS"
