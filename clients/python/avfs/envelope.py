"""Typed views of the JSON envelope of `avfs --json proxy exec`.

They mirror wire/envelope.go (documented in docs/envelope.md). The envelope
only gains fields: every class keeps the fields it does not know in
``extra`` (a dict), and ``raw`` on Envelope is the whole document as parsed,
so nothing a newer avfs adds is lost. Parsing never fails on a missing
field; it takes the field's zero value, as Go's encoding/json does.
"""

import base64
import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

ENVELOPE_KIND = "proxy_exec_result"
ENVELOPE_SCHEMA_VERSION = 1

# Exit statuses of `avfs proxy exec` (wire/envelope.go), as timeout(1) uses them.
EXIT_TIMED_OUT = 124  # the command ran out of time
EXIT_AVFS_FAILED = 125  # avfs itself failed (bad input, vault, mount)
EXIT_NOT_RUN = 126  # not run: deny or require_approval; or its changes were undone, held or previewed
EXIT_NOT_FOUND = 127  # the program does not exist

# Decisions (wire/decision.go), from the most to the least permissive.
ALLOW = "allow"
ALLOW_WITH_CHECKPOINT = "allow_with_checkpoint"
REQUIRE_APPROVAL = "require_approval"
DENY = "deny"


class _Wire:
    """Base of the wire classes: from_dict keeps unknown keys in extra."""

    @classmethod
    def from_dict(cls, d):
        if d is None:
            return None
        if not isinstance(d, dict):
            raise ValueError("%s: want a JSON object, got %r" % (cls.__name__, type(d).__name__))
        hints = typing.get_type_hints(cls)
        kw = {}
        known = set()
        for f in dataclasses.fields(cls):
            if f.name == "extra":
                continue
            known.add(f.name)
            if f.name in d:
                kw[f.name] = _convert(hints[f.name], d[f.name])
        obj = cls(**kw)
        obj.extra = {k: v for k, v in d.items() if k not in known}
        return obj


def _convert(tp, v):
    if v is None:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union:  # Optional[X]
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], v) if len(inner) == 1 else v
    if origin in (list, List):
        return [_convert(args[0], x) for x in v] if args else list(v)
    if isinstance(tp, type) and issubclass(tp, _Wire):
        return tp.from_dict(v)
    return v


@dataclass
class Reason(_Wire):
    id: str = ""
    message: str = ""
    decision: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class BundleInfo(_Wire):
    name: str = ""
    revision: str = ""
    roots: List[str] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class PolicyReport(_Wire):
    reasons: List[Reason] = field(default_factory=list)
    bundles: List[BundleInfo] = field(default_factory=list)
    trace: List[Any] = field(default_factory=list)  # with --explain, as parsed JSON
    eval_us: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class CommandReport(_Wire):
    argv: List[str] = field(default_factory=list)
    cwd: str = ""  # vault-absolute
    shell: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckpointRef(_Wire):
    id: int = 0
    name: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class ApprovalRef(_Wire):
    id: str = ""
    status: str = ""  # pending, granted, denied, used, expired
    expires_at: str = ""  # RFC 3339
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class MountReport(_Wire):
    mode: str = ""  # fuse or materialized
    dir: str = ""
    discarded: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class SandboxReport(_Wire):
    mode: str = ""  # namespaces or none
    reason: str = ""
    workspace: str = ""
    home: str = ""
    network: str = ""  # none or host
    landlock: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class ProcessReport(_Wire):
    exit_code: int = 0
    signal: str = ""
    timed_out: bool = False
    duration_ms: int = 0
    stdout: str = ""
    stderr: str = ""
    stdout_encoding: str = "utf-8"  # utf-8 or base64
    stderr_encoding: str = "utf-8"
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_omitted_at: int = 0
    stderr_omitted_at: int = 0
    killed_descendants: int = 0
    interrupted: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    def stdout_data(self) -> bytes:
        """stdout as the command wrote it (decoding base64 output)."""
        return _output_bytes(self.stdout, self.stdout_encoding)

    def stderr_data(self) -> bytes:
        """stderr as the command wrote it (decoding base64 output)."""
        return _output_bytes(self.stderr, self.stderr_encoding)


def _output_bytes(text, encoding):
    if encoding == "base64":
        return base64.b64decode(text)
    return text.encode("utf-8")


@dataclass
class Change(_Wire):
    path: str = ""  # vault-absolute; bytes that are not UTF-8 as U+FFFD
    path_b64: str = ""  # base64 of the path's bytes, only when they are not UTF-8
    op: str = ""  # added, modified, deleted
    kind: str = ""  # file, dir, symlink, fifo, socket
    size_before: Optional[int] = None
    size_after: Optional[int] = None
    mode_before: str = ""
    mode_after: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    def path_bytes(self) -> bytes:
        """The path's exact bytes (docs/envelope.md, "Names that are not UTF-8")."""
        if self.path_b64:
            return base64.b64decode(self.path_b64, validate=True)
        return self.path.encode("utf-8")


@dataclass
class RollbackReport(_Wire):
    restored: bool = False
    checkpoint: Optional[CheckpointRef] = None
    reason: str = ""  # exit_code or timed_out
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class EffectsReport(_Wire):
    """The effects policy's decision on what the run did (docs/envelope.md, "Policy over effects")."""

    decision: str = ""
    reasons: List[Reason] = field(default_factory=list)
    outcome: str = ""  # kept, undone or held
    held: Optional[CheckpointRef] = None  # where held changes wait
    eval_us: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class PreviewReport(_Wire):
    """The throwaway fork a previewed run ran in (docs/envelope.md, "Approve the diff")."""

    fork: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Hint(_Wire):
    code: str = ""  # network_off
    message: str = ""
    command: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Timing(_Wire):
    policy_ms: float = 0.0
    checkpoint_ms: float = 0.0
    mount_ms: float = 0.0
    sandbox_ms: float = 0.0
    run_ms: float = 0.0
    summary_ms: float = 0.0
    effects_ms: float = 0.0
    total_ms: float = 0.0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class ErrorBody(_Wire):
    """A wire error: code, message, and the details beside them in extra."""

    code: str = ""
    message: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def details(self) -> Dict[str, Any]:
        return self.extra


@dataclass
class Envelope(_Wire):
    """The document `avfs --json proxy exec` prints (schema_version 1)."""

    schema_version: int = 0
    kind: str = ""
    id: str = ""
    vault: str = ""  # the vault the command ran in (the fork, with --fork)
    forked_from: str = ""  # with --fork: the vault it was forked from
    decision: str = ""
    decision_id: str = ""  # the id the decision is recorded under (avfs policy replay)
    policy: Optional[PolicyReport] = None
    command: Optional[CommandReport] = None
    checkpoint: Optional[CheckpointRef] = None
    approval: Optional[ApprovalRef] = None
    mount: Optional[MountReport] = None
    sandbox: Optional[SandboxReport] = None
    process: Optional[ProcessReport] = None  # None when the command did not run
    changes: List[Change] = field(default_factory=list)
    changes_total: int = 0
    changes_truncated: bool = False
    rollback: Optional[RollbackReport] = None
    effects: Optional[EffectsReport] = None
    preview: Optional[PreviewReport] = None
    hints: List[Hint] = field(default_factory=list)
    timing: Optional[Timing] = None
    error: Optional[ErrorBody] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    # Set by the client: the exit status proxy exec exited with (or the
    # Avfs-Exit-Status header of avfs serve); None when parsed from a file.
    exit_status: Optional[int] = field(default=None, compare=False)
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d):
        env = super().from_dict(d)
        if env is None:
            return None
        env.extra.pop("exit_status", None)
        env.extra.pop("raw", None)
        env.raw = d
        return env

    @property
    def ran(self) -> bool:
        """Whether the command ran (process is set)."""
        return self.process is not None

    @property
    def reasons(self) -> List[Reason]:
        return self.policy.reasons if self.policy else []
