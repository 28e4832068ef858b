"""A stdlib-only Python client for avfs.

``Avfs`` runs commands through avfs (``avfs --json proxy exec``, or POST
/v1/exec on the Unix socket of ``avfs serve``) and returns typed
``Envelope`` objects; it also decides without running, and manages
approvals and checkpoints through the CLI. Failures avfs reports as an
error document raise ``AvfsError`` with the wire code, message and details.
An envelope is returned, never raised, whatever the decision: a denied or
pending command is an Envelope whose ``process`` is None.
"""

import http.client
import json
import os
import socket
import subprocess
from typing import Any, Dict, List, Optional, Sequence

from .envelope import *  # noqa: F401,F403
from .envelope import ENVELOPE_KIND, Envelope, EXIT_AVFS_FAILED

__all__ = ["Avfs", "AvfsError", "Envelope"]


class AvfsError(Exception):
    """avfs failed: code and message are the wire error's (docs/errors.md),
    details the rest of its fields; exit_status is avfs's exit status (or
    the HTTP status from avfs serve)."""

    def __init__(self, code: str, message: str, details: Optional[Dict[str, Any]] = None,
                 exit_status: Optional[int] = None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.details = details or {}
        self.exit_status = exit_status

    @classmethod
    def from_doc(cls, doc, exit_status=None):
        err = dict((doc or {}).get("error") or {})
        code = err.pop("code", "") or "unknown"
        msg = err.pop("message", "") or "avfs failed"
        return cls(code, msg, err, exit_status)


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=None):
        super().__init__("avfs", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def _ms(seconds):
    return None if seconds is None else int(round(seconds * 1000))


class Avfs:
    """A handle on avfs: the binary, its home (AVFS_HOME), the vault, and
    optionally the Unix socket of a running ``avfs serve`` for exec and
    decide. Calls are independent: a handle may be shared between threads.
    Timeouts are in seconds."""

    def __init__(self, bin: str = "avfs", home: Optional[str] = None, vault: Optional[str] = None,
                 server: Optional[str] = None):
        self.bin = bin
        self.home = home
        self.vault = vault
        if server and server.startswith("unix:"):
            server = server[len("unix:"):]
        self.server = server

    # -- running avfs ------------------------------------------------------

    def _environ(self):
        env = dict(os.environ)
        if self.home is not None:
            env["AVFS_HOME"] = self.home
        return env

    def _cli(self, args: Sequence[str]):
        """Runs avfs --json ARGS; returns (document, exit status)."""
        cmd = [self.bin, "--json"] + (["--vault", self.vault] if self.vault else []) + list(args)
        p = subprocess.run(cmd, capture_output=True, env=self._environ(), stdin=subprocess.DEVNULL)
        try:
            doc = json.loads(p.stdout) if p.stdout.strip() else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise AvfsError("no_json", "avfs %s printed no JSON (exit %d): %s" % (
                " ".join(args[:2]), p.returncode, p.stderr.decode(errors="replace").strip()),
                exit_status=p.returncode)
        return doc, p.returncode

    def _cli_ok(self, args):
        doc, rc = self._cli(args)
        if rc != 0 or ("error" in doc and set(doc) == {"error"}):
            raise AvfsError.from_doc(doc, rc)
        return doc

    def _post(self, path, body, timeout=None):
        conn = _UnixHTTPConnection(self.server, timeout=timeout)
        try:
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            status = resp.getheader("Avfs-Exit-Status")
        finally:
            conn.close()
        try:
            doc = json.loads(data)
        except ValueError:
            raise AvfsError("no_json", "avfs serve %s: HTTP %d: %s" % (path, resp.status, data[:200]),
                            exit_status=resp.status)
        if resp.status != 200:
            raise AvfsError.from_doc(doc, resp.status)
        return doc, (int(status) if status is not None else None)

    # -- exec and decide ---------------------------------------------------

    def exec(self, argv: Optional[Sequence[str]] = None, shell: Optional[str] = None,
             cwd: Optional[str] = None, timeout: Optional[float] = None, readonly: bool = False,
             approval: Optional[str] = None, env: Optional[Sequence[str]] = None,
             mount_mode: Optional[str] = None) -> Envelope:
        """Runs argv (or the shell script) through avfs and returns its
        envelope, whatever the decision; env is KEY=VALUE strings for the
        command. timeout is seconds, or (over the CLI) a Go duration string
        ("10s") passed to --timeout as it is; mount_mode is auto, fuse or
        materialize. Raises AvfsError when avfs prints an error document instead
        of an envelope (usage, configuration, an unreachable server)."""
        if (argv is None) == (shell is None):
            raise ValueError("exec: give argv or shell, not both or neither")
        if self.server:
            req = {"argv": list(argv) if argv is not None else None, "shell": shell, "cwd": cwd,
                   "vault": self.vault, "timeout_ms": _ms(timeout), "readonly": readonly or None,
                   "approval_id": approval, "env": list(env) if env else None, "mount_mode": mount_mode}
            req = {k: v for k, v in req.items() if v is not None}
            if isinstance(timeout, str):
                raise ValueError("exec: over avfs serve, timeout is a number of seconds")
            doc, status = self._post("/v1/exec", req, timeout=None if timeout is None else timeout + 60)
        else:
            args = ["proxy", "exec"]
            if cwd is not None:
                args += ["--cwd", cwd]
            if timeout is not None:
                args += ["--timeout", timeout if isinstance(timeout, str) else "%dms" % _ms(timeout)]
            if mount_mode:
                args += ["--mount-mode", mount_mode]
            if readonly:
                args += ["--readonly"]
            if approval:
                args += ["--approval", approval]
            for kv in env or ():
                args += ["--env", kv]
            args += ["--shell", shell] if shell is not None else ["--"] + list(argv)
            doc, status = self._cli(args)
        if doc.get("kind") != ENVELOPE_KIND:
            raise AvfsError.from_doc(doc, status)
        envl = Envelope.from_dict(doc)
        envl.exit_status = status
        return envl

    def decide(self, argv: Optional[Sequence[str]] = None, shell: Optional[str] = None,
               cwd: Optional[str] = None, approval: Optional[str] = None) -> Dict[str, Any]:
        """What the policy says about a command, without running it: the
        document of ``avfs --json policy eval`` (decision, reasons, bundles,
        sandbox), as a dict; through ``avfs serve`` also ``decision_id``,
        the decision's id in a decision log."""
        if (argv is None) == (shell is None):
            raise ValueError("decide: give argv or shell, not both or neither")
        if self.server:
            req = {"argv": list(argv) if argv is not None else None, "shell": shell, "cwd": cwd,
                   "vault": self.vault, "approval_id": approval}
            return self._post("/v1/decide", {k: v for k, v in req.items() if v is not None})[0]
        args = ["policy", "eval"]
        if cwd is not None:
            args += ["--cwd", cwd]
        if approval:
            args += ["--approval", approval]
        args += ["--shell", shell] if shell is not None else ["--"] + list(argv)
        return self._cli_ok(args)

    # -- approvals ---------------------------------------------------------

    def approval_list(self, status: Optional[str] = None) -> List[Dict[str, Any]]:
        """The vault's approvals (avfs approval list), newest as avfs orders them."""
        args = ["approval", "list"] + (["--status", status] if status else [])
        return self._cli_ok(args).get("approvals") or []

    def approval_grant(self, id: str, reason: Optional[str] = None) -> Dict[str, Any]:
        """Grants a pending approval; returns the approval."""
        return self._cli_ok(["approval", "grant", id] + (["--reason", reason] if reason else []))

    def approval_deny(self, id: str, reason: Optional[str] = None) -> Dict[str, Any]:
        """Denies a pending approval; returns the approval."""
        return self._cli_ok(["approval", "deny", id] + (["--reason", reason] if reason else []))

    # -- checkpoints -------------------------------------------------------

    def checkpoint_list(self) -> List[Dict[str, Any]]:
        """The vault's checkpoints (avfs checkpoint list)."""
        return self._cli_ok(["checkpoint", "list"]).get("checkpoints") or []

    def checkpoint_restore(self, id) -> Dict[str, Any]:
        """Puts the vault back as it was at checkpoint id (a number or name)."""
        return self._cli_ok(["checkpoint", "restore", str(id)])
