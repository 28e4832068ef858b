package main

// The approver secret (AVFS_APPROVER_KEY) is taken out of avfs's
// environment before anything else runs (secret.c): the kernel shows a
// process's starting environment in /proc/PID/environ to every process of
// the same user, a command run without a sandbox included, and Go's
// os.Unsetenv does not touch that copy.

/*
const char *avfs_approver_secret(void);
*/
import "C"

import "os"

// approverSecretEnv is the variable that holds the approver secret.
const approverSecretEnv = "AVFS_APPROVER_KEY"

// approverSecret is the secret avfs was started with (taken out of its
// environment), else what the variable holds now (set in this process,
// by a test).
func approverSecret() string {
	if s := C.avfs_approver_secret(); s != nil {
		return C.GoString(s)
	}
	return os.Getenv(approverSecretEnv)
}
