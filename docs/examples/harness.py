#!/usr/bin/env python3
"""A small agent harness around `avfs proxy exec` (Python 3, stdlib only).

An agent framework runs every command of its agent through avfs instead of
a shell. avfs decides with its policy, checkpoints the vault when the
command may change it, runs the command in the vault and prints one JSON
envelope (schema_version 1). This script, built on the Python client in
clients/python (the avfs package), shows how to act on each decision:

  allow, allow_with_checkpoint   the command ran: show its output and the
                                 files it changed; after a checkpoint, offer
                                 to undo the changes (avfs checkpoint restore)
  deny                           it did not run: report the policy's reasons
  require_approval               it did not run: ask a person, record the
                                 answer (avfs approval grant|deny), and when
                                 granted run it again with --approval ID

Usage:

  harness.py [--avfs PATH] [--vault NAME] [--timeout 60s] [--mount-mode auto]
             [--auto-approve | --auto-deny] [--rollback | --keep] -- CMD [ARG...]

Without --auto-approve/--auto-deny and --rollback/--keep the harness asks on
the terminal, and says no when there is none (stdin is not a TTY). It exits
with the command's status, or avfs's: 124 timed out, 125 avfs failed, 126 not
run (denied, not approved), 127 program not found, 128+N killed by signal N.
Its own messages go to stderr, prefixed "harness:"; the command's output goes
to stdout and stderr as the command wrote it.
"""

import argparse
import os
import sys

# The client lives in clients/python; installed elsewhere, import it as is.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

from avfs import Avfs, AvfsError  # noqa: E402
from avfs.envelope import ENVELOPE_SCHEMA_VERSION, EXIT_AVFS_FAILED, EXIT_NOT_FOUND, EXIT_NOT_RUN  # noqa: E402


def log(message):
    print("harness: " + message, file=sys.stderr, flush=True)


def ask(question, answer):
    """answer (True/False) when the flags gave one; else ask on the terminal."""
    if answer is not None:
        return answer
    if not sys.stdin.isatty():
        log(question + " -> no (not interactive)")
        return False
    try:
        reply = input(question + " [y/N] ")
    except EOFError:
        return False
    return reply.strip().lower() in ("y", "yes")


def describe_change(c):
    size = {"added": "%s bytes" % c.size_after, "deleted": "was %s bytes" % c.size_before}.get(
        c.op, "%s -> %s bytes" % (c.size_before, c.size_after))
    mode = ""
    if c.mode_before and c.mode_after and c.mode_before != c.mode_after:
        mode = ", mode %s -> %s" % (c.mode_before, c.mode_after)
    return "%s %s %s (%s%s)" % (c.op, c.kind, c.path, size, mode)


def show_run(env):
    """Passes the command's output on and reports how it ended."""
    p = env.process
    sys.stdout.buffer.write(p.stdout_data())
    sys.stdout.flush()
    sys.stderr.buffer.write(p.stderr_data())
    sys.stderr.flush()
    for stream in ("stdout", "stderr"):
        if getattr(p, stream + "_truncated"):
            log("%s was cut: the command wrote %d bytes, avfs kept the head and the tail"
                % (stream, getattr(p, stream + "_bytes")))
    if p.timed_out:
        log("timed out after %d ms (ended with %s)" % (p.duration_ms, p.signal or "its own exit"))
    elif p.exit_code == EXIT_NOT_FOUND:
        log("program not found: %s" % env.command.argv[:1])
    elif p.signal:
        log("killed by %s" % p.signal)
    if p.interrupted:
        log("cut short: avfs received %s and passed it on" % p.interrupted)
    if env.mount and env.mount.discarded:
        log("read-only run: %d change(s) to the copy were thrown away" % env.mount.discarded)
    log("exit %d, %d change(s)" % (p.exit_code, env.changes_total))
    for h in env.hints:
        # network_off: the sandbox had no network and the command needed one;
        # the message says how to get it, command (if any) is what to run next.
        log("hint %s: %s" % (h.code, h.message))
        if h.command:
            log("  next: %s" % h.command)
    for c in env.changes:
        log("  " + describe_change(c))
    if env.changes_truncated:
        log("  … and %d more (see avfs checkpoint diff)" % (env.changes_total - len(env.changes)))


def handle(avfs, opts, argv, env):
    """Acts on one envelope and returns the harness's exit status."""
    if env.schema_version != ENVELOPE_SCHEMA_VERSION:
        raise AvfsError("unsupported", "unsupported envelope schema_version %r" % env.schema_version)
    status = env.exit_status
    log("decision %s (%s)" % (env.decision, ", ".join(r.id for r in env.reasons)))

    if not env.ran:
        if env.error is not None:
            # avfs failed (125; the decision is then "deny", fail closed),
            # or the approval given was refused (126).
            log("not run: %s: %s" % (env.error.code, env.error.message))
            return status
        if env.decision == "deny":
            log("denied by the policy:")
            for r in env.reasons:
                log("  %s: %s" % (r.id, r.message))
            return status
        if env.decision == "require_approval":
            return approve_and_rerun(avfs, opts, argv, env)
        log("not run, exit %d" % status)
        return status

    # The command ran (allow, allow_with_checkpoint, or an approved run).
    show_run(env)
    if env.error is not None:
        log("avfs failed after the run: %s: %s" % (env.error.code, env.error.message))
    if env.rollback is not None:
        log("rolled back to checkpoint %d (%s)" % (env.rollback.checkpoint.id, env.rollback.reason))
    elif env.checkpoint is not None and env.changes:
        cp = env.checkpoint.id
        if ask("Undo these changes (restore checkpoint %d)?" % cp, opts.rollback):
            avfs.checkpoint_restore(cp)
            log("restored checkpoint %d" % cp)
    return status


def approve_and_rerun(avfs, opts, argv, env):
    """Asks a person about a pending approval; grants and reruns, or denies."""
    ap = env.approval
    log("approval needed (%s, expires %s):" % (ap.id, ap.expires_at))
    for r in env.reasons:
        log("  %s: %s" % (r.id, r.message))
    if not ask("Run %r?" % " ".join(argv), opts.approve):
        avfs.approval_deny(ap.id, reason="declined in the harness")
        log("denied %s" % ap.id)
        return EXIT_NOT_RUN
    # With an approver secret configured (AVFS_APPROVER_KEY or approval.key_file),
    # the grant must be made where the secret is: here, the person's side.
    avfs.approval_grant(ap.id, reason="approved in the harness")
    log("granted %s; running it" % ap.id)
    # The approval is bound to this exact command, directory, vault and
    # policy revision, and can be used once.
    return handle(avfs, opts, argv, run(avfs, opts, argv, approval=ap.id))


def run(avfs, opts, argv, approval=None):
    # stdin stays ours: avfs gives the command /dev/null.
    return avfs.exec(argv=argv, timeout=opts.timeout, mount_mode=opts.mount_mode, approval=approval)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--avfs", default="avfs", help="the avfs binary (default: avfs on the PATH)")
    parser.add_argument("--vault", help="the vault (default: avfs's current vault)")
    parser.add_argument("--timeout", default="60s", help="avfs proxy exec --timeout (default 60s)")
    parser.add_argument("--mount-mode", help="fuse, materialize or auto (avfs's default)")
    approve = parser.add_mutually_exclusive_group()
    approve.add_argument("--auto-approve", dest="approve", action="store_const", const=True,
                         help="grant approvals without asking (for tests)")
    approve.add_argument("--auto-deny", dest="approve", action="store_const", const=False,
                         help="deny approvals without asking")
    rollback = parser.add_mutually_exclusive_group()
    rollback.add_argument("--rollback", dest="rollback", action="store_const", const=True,
                          help="undo every run that changed files (restore its checkpoint)")
    rollback.add_argument("--keep", dest="rollback", action="store_const", const=False,
                          help="keep the changes without asking")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARG...]")
    opts = parser.parse_args()
    argv = opts.command[1:] if opts.command[:1] == ["--"] else opts.command
    if not argv:
        parser.error("missing command (… -- CMD [ARG...])")
    avfs = Avfs(bin=opts.avfs, vault=opts.vault)
    try:
        return handle(avfs, opts, argv, run(avfs, opts, argv))
    except AvfsError as e:
        # A usage or configuration error is an {"error": …} document, not an envelope.
        log("avfs failed (exit %s): %s: %s" % (e.exit_status, e.code, e.message))
        return EXIT_AVFS_FAILED


if __name__ == "__main__":
    sys.exit(main())
