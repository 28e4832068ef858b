// Package runner runs one agent command under policy: parse and decide,
// checkpoint, mount the workspace, run the command, unmount, summarise.
//
// This file documents the process part (Start, Run, Proc); the other steps
// are documented where they are implemented.
//
// # Processes
//
// Start runs the command in a new session (hence its own process group),
// with exactly the environment it is given, stdin from /dev/null unless a
// reader is given, and stdout and stderr drained through pipes into bounded
// head-and-tail captures. While the command runs, avfs is a child subreaper,
// so descendants that double-fork or setsid are reparented to avfs rather
// than to init, and /proc is scanned every few tens of milliseconds to learn
// which processes descend from the command. A command that is over before
// the first scan, and left nothing behind (it was avfs's only child), costs
// no scan at all.
//
// When the command exits, times out or its context is cancelled, every
// process that is still running and belongs to it gets SIGTERM (or, when
// the context was cancelled with an Interrupted cause, the signal avfs
// received) and SIGCONT, then SIGKILL after a grace period; what was killed
// is reaped with wait4 on its own pid, never wait4(-1). Wait returns only when all of them are gone
// and both streams are drained (or a safety bound has passed).
//
// Which processes belong to the command is decided by the rule documented on
// ProcSpec.Exclude: the caller's other children are never signalled or
// reaped. (While a command runs, orphans of the caller's other children are
// reparented to avfs too; they are left for the caller to reap.) Only one
// unsandboxed command runs at a time per avfs process: Start waits for the
// previous one to end. Sandboxed commands, supervised through the init of
// their PID namespace (no subreaper, no scan), run beside them and each
// other (avfs serve runs commands on different vaults at once).
package runner
