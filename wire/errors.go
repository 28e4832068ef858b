package wire

import (
	"errors"
	"fmt"
	"syscall"
)

// Code is a stable snake_case error code. Codes appear on the wire as
// error.code and each maps to one documented exit status (see ExitCode).
type Code string

// The error codes. Documented in docs/errors.md; never renamed.
const (
	CodeNotFound           Code = "not_found"             // a path does not exist in the vault
	CodeAlreadyExists      Code = "already_exists"        // the target path or vault already exists
	CodeInvalidPath        Code = "invalid_path"          // a vault path is malformed or escapes the root
	CodeInvalidInput       Code = "invalid_input"         // a flag, name or argument is not acceptable
	CodeUsage              Code = "usage"                 // the command line itself is wrong
	CodeNotDir             Code = "not_a_directory"       // a path component is not a directory
	CodeIsDir              Code = "is_a_directory"        // a file operation named a directory
	CodeNotEmpty           Code = "directory_not_empty"   // rmdir or rename over a non-empty directory
	CodeVaultNotFound      Code = "vault_not_found"       // no vault by that name
	CodeVaultBusy          Code = "vault_busy"            // the vault is locked by another user (mount, writer)
	CodeVaultHasForks      Code = "vault_has_forks"       // delete refused: live forks borrow from this vault
	CodeVaultUnreadable    Code = "vault_unreadable"      // the vault's file cannot be opened as a vault of this avfs (reason: a VaultFault); vault delete --force removes it
	CodeQuotaExceeded      Code = "quota_exceeded"        // the write would exceed a quota; nothing changed
	CodeNoSpace            Code = "no_space"              // the disk under the vault or a temporary directory is full; the failed write changed nothing, earlier commits stay
	CodeCheckpointNotFound Code = "checkpoint_not_found"  // no checkpoint by that id or name
	CodeCheckpointPinned   Code = "checkpoint_pinned"     // delete refused: a run under way will roll back to the checkpoint
	CodeVersionNotFound    Code = "version_not_found"     // no such version in a file's history
	CodeIntegrity          Code = "integrity_failed"      // vault check or audit verify found problems; a read met a missing or damaged chunk
	CodeHostIO             Code = "host_io"               // reading or writing the host file system failed
	CodeFuseUnavailable    Code = "fuse_unavailable"      // FUSE cannot be used here (no /dev/fuse, no permission, no fusermount3, mounting refused)
	CodeMountFailed        Code = "mount_failed"          // mounting or unmounting failed
	CodeMountBusy          Code = "mount_busy"            // the mount is in use; details name the processes holding it
	CodeNotMounted         Code = "not_mounted"           // the directory is not an avfs mount
	CodeApprovalNotFound   Code = "approval_not_found"    // no approval with that id
	CodeApprovalRejected   Code = "approval_rejected"     // the approval does not allow this run (pending, denied, used, expired, another command, bad grant)
	CodeApproverKey        Code = "approver_key_required" // granting needs the approver secret, which was not given or is wrong
	CodeBundleInvalid      Code = "bundle_invalid"        // a policy bundle cannot be loaded: bad Rego, wrong layout, missing entrypoint, overlapping roots
	CodeSignatureInvalid   Code = "signature_invalid"     // a bundle's signature is missing, malformed, or does not verify
	CodePolicyError        Code = "policy_error"          // the policy could not be evaluated (avfs policy eval/test); proxy exec fails closed instead
	CodeSandbox            Code = "sandbox_unavailable"   // the sandbox cannot be built here (what the kernel refused is in step and errno); nothing ran
	CodeWritableTrust      Code = "trust_writable"        // without a sandbox, the command could rewrite what avfs trusts (approver key, config, policy); nothing ran
	CodeAuditKey           Code = "audit_key_invalid"     // the installation's audit key file cannot be trusted or read (a symlink, another owner, group/world access, wrong size)
	CodeConflict           Code = "conflict"              // the vault changed since what was asked for was computed (held changes, a preview); nothing applied
	CodeMergeConflict      Code = "merge_conflict"        // vault merge found paths both vaults changed and no choice resolves; nothing was applied; details list them
	CodeEffectsDenied      Code = "effects_denied"        // the effects policy did not allow a change set (vault merge): deny or require_approval; nothing was applied; details: decision, reasons
	CodeReplicaUnavailable Code = "replica_unavailable"   // a vault's replica cannot be reached, read or written (no such bucket or directory, refused credentials, network); details: url (never credentials)
	CodeReplicaEmpty       Code = "replica_empty"         // vault restore: the replica holds nothing at or before the time asked; details: url
	CodeReplicaDamaged     Code = "replica_damaged"       // vault restore: the replica's files do not check out (checksum, missing link in the chain); nothing was restored; details: url
	CodeInternal           Code = "internal"              // a bug or an unexpected storage failure
)

// Exit statuses of avfs commands (except proxy exec, which follows timeout(1)).
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// ExitCode maps an error code to the process exit status.
func ExitCode(c Code) int {
	switch c {
	case CodeUsage:
		return ExitUsage
	case "":
		return ExitOK
	default:
		return ExitFailure
	}
}

// Error is the one error type of avfs. Code is stable and machine readable;
// Message is for people; Details are extra fields merged into the JSON error
// object. Err, when set, is the underlying cause (not serialised).
type Error struct {
	Code    Code
	Message string
	Details map[string]any
	Err     error
}

// Errorf returns an *Error with the given code and a formatted message. A %w
// verb in format records the wrapped error as the cause.
//
// A host_io error whose cause is a full file system (ENOSPC, or EDQUOT: the
// host's own disk quota) is no_space instead: the one place that tells a
// full disk from other trouble of the host, for every caller.
func Errorf(code Code, format string, args ...any) *Error {
	e := fmt.Errorf(format, args...)
	cause := errors.Unwrap(e)
	if _, several := e.(interface{ Unwrap() []error }); several {
		cause = e // format wraps more than one error: errors.Is and As see them all
	}
	if code == CodeHostIO && IsNoSpace(cause) {
		code = CodeNoSpace
	}
	return &Error{Code: code, Message: e.Error(), Err: cause}
}

// IsNoSpace reports whether err says that a file system is full: ENOSPC or
// EDQUOT in its chain, or the no_space code.
func IsNoSpace(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || HasCode(err, CodeNoSpace))
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// With returns e with one more detail field.
func (e *Error) With(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// Is makes errors.Is(err, &Error{Code: c}) match any *Error with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// CodeOf returns the code of the first *Error in err's chain, CodeInternal
// for any other non-nil error, and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// HasCode reports whether err carries the given code.
func HasCode(err error, c Code) bool { return err != nil && CodeOf(err) == c }

// ErrorObject is the JSON form of an error: {"code": ..., "message": ..., details...}.
// Message is the full message of err (with the operations that wrapped it).
// A string detail that is not valid UTF-8 (a vault path with such a name)
// comes with its companion KEY_b64 (see B64), unless a detail has that key.
func ErrorObject(err error) map[string]any {
	obj := map[string]any{}
	var e *Error
	if errors.As(err, &e) {
		for k, v := range e.Details {
			obj[k] = v
		}
		for k, v := range e.Details {
			if s, ok := v.(string); ok && B64(s) != "" {
				if _, taken := obj[k+"_b64"]; !taken {
					obj[k+"_b64"] = B64(s)
				}
			}
		}
	}
	obj["code"] = string(CodeOf(err))
	obj["message"] = err.Error()
	return obj
}

// ErrorDocument is the whole JSON document printed for a failed command with --json.
type ErrorDocument struct {
	Error map[string]any `json:"error"`
}
