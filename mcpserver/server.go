// Package mcpserver serves avfs as a Model Context Protocol server: the
// tools exec (what `avfs proxy exec` runs), checkpoint_list,
// checkpoint_restore, changes and approval_status, over any transport of
// the official Go SDK (stdio, Streamable HTTP). It is documented in
// docs/mcp.md.
package mcpserver

import (
	"context"
	"crypto/rand"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"avfs/runner"
	"avfs/vault"
	"avfs/wire"
)

// Config is what the server needs from its host (cmd/avfs builds it the way
// proxy exec builds its runner).
type Config struct {
	// Store holds the vaults the tools work on.
	Store *vault.Store
	// Vault is the vault a tool call works on when it names none.
	Vault string
	// NewRunner returns the runner of one exec call (the config, policy
	// and sandbox of proxy exec). Its error is reported in the envelope,
	// as proxy exec does.
	NewRunner func(ctx context.Context) (*runner.Runner, error)
	// GrantProof returns the proof of a grant (the approver secret's MAC or
	// a signature, see runner.GrantMAC) for an approval the user granted
	// through elicitation; nil, or a nil function from it, grants without
	// one. Its error refuses the grant.
	GrantProof func() (func(vault.Approval) (string, error), error)
	// Forward runs an exec elsewhere when that is where it must run (the
	// vault is a workspace kept mounted by another avfs, which alone may
	// change it): ok false runs it here. Cancelling ctx ends that run.
	Forward func(ctx context.Context, req runner.Request) (env *wire.Envelope, ok bool)
	// Restore restores a checkpoint for checkpoint_restore; nil restores
	// it here, in the vault file.
	Restore func(ctx context.Context, vault, ref string) (vault.RestoreResult, error)
	// Settle does what a decided approval of held or previewed changes
	// asks (vault.Store.SettleApproval) for approval_grant and
	// approval_deny; nil settles here, in the vault the tool opened.
	Settle func(ctx context.Context, v *vault.Vault, a vault.Approval) ([]wire.Change, error)
	// Version is the server's version in the initialize answer.
	Version string
	// ProgressEvery is the interval of progress notifications while a
	// command runs (0: DefaultProgressEvery).
	ProgressEvery time.Duration
}

// DefaultProgressEvery is how often a running exec reports progress to a
// client that asked for it.
const DefaultProgressEvery = time.Second

// Server is the MCP server of a Config, and the exec calls it is running.
type Server struct {
	*mcp.Server
	h *handlers
}

// New returns the MCP server of cfg. The server may serve many sessions at
// once; exec calls on one vault take turns as proxy exec runs do.
func New(cfg Config) *Server {
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "avfs", Title: "avfs", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "Run shell commands under avfs: each exec is parsed, decided by policy, checkpointed and run in a sandbox over the vault; " +
			"its result is the proxy exec envelope. Undo a run with checkpoint_restore.",
	})
	h := &handlers{cfg: cfg, stateKey: make([]byte, 32)}
	_, _ = rand.Read(h.stateKey)
	mcp.AddTool(s, &mcp.Tool{
		Name:  "exec",
		Title: "Run a command under policy",
		Description: "Run one command (argv, or a shell script for /bin/sh -c) in the vault under avfs policy: parse, decide, checkpoint, mount, run in the sandbox. " +
			"The result is the proxy exec envelope (docs/envelope.md); isError is true when the command was not run (deny, approval needed, avfs failed) or exited non-zero. " +
			"A command that needs approval is asked of the user through elicitation when the client supports it; otherwise the result names the pending approval and how a person grants it.",
		OutputSchema: envelopeSchema(),
	}, h.exec)
	mcp.AddTool(s, &mcp.Tool{
		Name:         "checkpoint_list",
		Title:        "List checkpoints",
		Description:  "List the vault's checkpoints, oldest first (every changing exec leaves one, named after its execution id).",
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
		OutputSchema: schemaFor[CheckpointList](),
	}, h.checkpointList)
	mcp.AddTool(s, &mcp.Tool{
		Name:         "checkpoint_restore",
		Title:        "Restore a checkpoint",
		Description:  "Return the vault to a checkpoint's state (by id or name) and list what that changed; later checkpoints stay restorable.",
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
		OutputSchema: schemaFor[vault.RestoreResult](),
	}, h.checkpointRestore)
	mcp.AddTool(s, &mcp.Tool{
		Name:         "changes",
		Title:        "Changes since a checkpoint",
		Description:  "List the paths added, modified or deleted from checkpoint since to checkpoint to (default: the current state).",
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
		OutputSchema: schemaFor[Changes](),
	}, h.changes)
	mcp.AddTool(s, &mcp.Tool{
		Name:         "approval_status",
		Title:        "Show an approval",
		Description:  "Show one approval request: its status (pending, granted, denied, used, expired), command and reasons.",
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
		OutputSchema: schemaFor[vault.Approval](),
	}, h.approvalStatus)
	return &Server{Server: s, h: h}
}

// Drain refuses new exec calls, cancels those running with cause (a
// runner.Interrupted forwards its signal to their commands) and waits
// until they have ended and cleaned up, or ctx is done (then it returns
// ctx's error). It is for shutting down: the transport may end a session
// before the calls it started have returned.
func (s *Server) Drain(ctx context.Context, cause error) error {
	return s.h.calls.drain(ctx, cause)
}

func ptr[T any](v T) *T { return &v }

// schemaFor is the JSON schema of T as the SDK infers it, with the types
// that marshal themselves described as they appear on the wire: a vault
// kind and a file mode are strings, and an envelope's error object is open to its details
// (merged beside code and message by wire.ErrorBody.MarshalJSON).
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[wire.ErrorBody](): {
			Types: []string{"null", "object"},
			Properties: map[string]*jsonschema.Schema{
				"code":    {Type: "string", Description: "the error code (docs/errors.md)"},
				"message": {Type: "string"},
			},
			Required: []string{"code", "message"},
		},
		reflect.TypeFor[vault.Kind]():    {Type: "string", Enum: []any{"file", "dir", "symlink", "fifo", "socket"}},
		reflect.TypeFor[wire.FileMode](): {Type: "string", Pattern: "^[0-7]{4}$", Description: "permission bits, four octal digits (\"0644\")"},
	}})
	if err != nil {
		panic(fmt.Sprintf("mcpserver: the schema of %T: %v", *new(T), err)) // a programming error, caught by every test
	}
	return s
}

// envelopeSchema is the output schema of exec: the envelope's, with its
// decisions enumerated.
func envelopeSchema() *jsonschema.Schema {
	s := schemaFor[wire.Envelope]()
	s.Properties["decision"].Enum = []any{string(wire.Allow), string(wire.AllowWithCheckpoint), string(wire.RequireApproval), string(wire.Deny)}
	return s
}

type handlers struct {
	cfg   Config
	calls calls
	// stateKey signs the request state of an approval asked through
	// elicitation, which the client echoes back (see sealState).
	stateKey []byte
}

func (h *handlers) vaultOf(name string) string {
	if name != "" {
		return name
	}
	return h.cfg.Vault
}

// withVault opens the named vault (the default vault is created on first
// use, as the CLI does) and closes it after fn.
func (h *handlers) withVault(ctx context.Context, name string, fn func(v *vault.Vault) error) error {
	v, err := h.cfg.Store.OpenOrCreate(ctx, h.vaultOf(name))
	if err != nil {
		return err
	}
	defer v.Close()
	return fn(v)
}

// CheckpointListInput is the input of checkpoint_list.
type CheckpointListInput struct {
	Vault string `json:"vault,omitempty" jsonschema:"the vault (default: the server's vault)"`
}

// CheckpointList is the output of checkpoint_list, the document of
// `avfs --json checkpoint list`.
type CheckpointList struct {
	Vault       string             `json:"vault"`
	Checkpoints []vault.Checkpoint `json:"checkpoints"`
}

func (h *handlers) checkpointList(ctx context.Context, _ *mcp.CallToolRequest, in CheckpointListInput) (*mcp.CallToolResult, CheckpointList, error) {
	out := CheckpointList{Vault: h.vaultOf(in.Vault), Checkpoints: []vault.Checkpoint{}}
	err := h.withVault(ctx, in.Vault, func(v *vault.Vault) error {
		cps, err := v.Checkpoints(ctx)
		if cps != nil {
			out.Checkpoints = cps
		}
		return err
	})
	if err != nil {
		return nil, out, toolError(err)
	}
	return nil, out, nil
}

// CheckpointRestoreInput is the input of checkpoint_restore.
type CheckpointRestoreInput struct {
	Vault      string `json:"vault,omitempty" jsonschema:"the vault (default: the server's vault)"`
	Checkpoint string `json:"checkpoint" jsonschema:"the checkpoint's id or name"`
}

func (h *handlers) checkpointRestore(ctx context.Context, _ *mcp.CallToolRequest, in CheckpointRestoreInput) (*mcp.CallToolResult, vault.RestoreResult, error) {
	var out vault.RestoreResult
	var err error
	if h.cfg.Restore != nil {
		name := in.Vault
		if name == "" {
			name = h.cfg.Vault
		}
		out, err = h.cfg.Restore(ctx, name, in.Checkpoint)
	} else {
		err = h.withVault(ctx, in.Vault, func(v *vault.Vault) error {
			var err error
			out, err = v.RestoreCheckpoint(ctx, in.Checkpoint)
			return err
		})
	}
	if err != nil {
		return nil, out, toolError(err)
	}
	if out.Changes == nil {
		out.Changes = []vault.Change{}
	}
	return nil, out, nil
}

// ChangesInput is the input of changes.
type ChangesInput struct {
	Vault string `json:"vault,omitempty" jsonschema:"the vault (default: the server's vault)"`
	Since string `json:"since" jsonschema:"the checkpoint (id or name) to compare from"`
	To    string `json:"to,omitempty" jsonschema:"the checkpoint to compare to (default: the current state)"`
}

// Changes is the output of changes, the document of `avfs --json
// checkpoint diff`.
type Changes struct {
	From    string         `json:"from"`
	To      string         `json:"to"` // "" for the current state
	Changes []vault.Change `json:"changes"`
}

func (h *handlers) changes(ctx context.Context, _ *mcp.CallToolRequest, in ChangesInput) (*mcp.CallToolResult, Changes, error) {
	out := Changes{From: in.Since, To: in.To, Changes: []vault.Change{}}
	err := h.withVault(ctx, in.Vault, func(v *vault.Vault) error {
		ch, err := v.Diff(ctx, in.Since, in.To)
		if ch != nil {
			out.Changes = ch
		}
		return err
	})
	if err != nil {
		return nil, out, toolError(err)
	}
	return nil, out, nil
}

// ApprovalStatusInput is the input of approval_status.
type ApprovalStatusInput struct {
	Vault string `json:"vault,omitempty" jsonschema:"the vault (default: the server's vault)"`
	ID    string `json:"id" jsonschema:"the approval id (ap-…)"`
}

func (h *handlers) approvalStatus(ctx context.Context, _ *mcp.CallToolRequest, in ApprovalStatusInput) (*mcp.CallToolResult, vault.Approval, error) {
	var out vault.Approval
	err := h.withVault(ctx, in.Vault, func(v *vault.Vault) error {
		var err error
		out, err = v.Approval(ctx, in.ID)
		return err
	})
	if err != nil {
		return nil, out, toolError(err)
	}
	return nil, out, nil
}

// toolError is a failed tool call's error as the model reads it: the
// avfs error code, then the message.
func toolError(err error) error {
	return fmt.Errorf("%s: %s", wire.CodeOf(err), err)
}

// commandText is a command as a person reads it.
func commandText(argv []string, shell string) string {
	if shell != "" {
		return "sh -c " + shell
	}
	return strings.Join(argv, " ")
}
