package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/runner"
	"avfs/vault"
	"avfs/wire"
	"avfs/workspace"
)

// approvalList is the JSON document of `avfs approval list`.
type approvalList struct {
	Vault     string           `json:"vault"`
	Approvals []vault.Approval `json:"approvals"`
}

// approverKey returns the approver secret: AVFS_APPROVER_KEY, else the
// file named by approval.key_file in the config. required makes a
// configured but unreadable key an error.
func approverKey(cfg config, required bool) ([]byte, error) {
	if k := approverSecret(); k != "" {
		return []byte(k), nil
	}
	if cfg.Approval.KeyFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(cfg.Approval.KeyFile)
	if err != nil {
		return nil, wire.Errorf(wire.CodeApproverKey, "the approver secret is configured (%s) but cannot be read: %v", cfg.Approval.KeyFile, err)
	}
	k := strings.TrimSpace(string(b))
	if k == "" {
		return nil, wire.Errorf(wire.CodeApproverKey, "the approver key file %s is empty", cfg.Approval.KeyFile)
	}
	return []byte(k), nil
}

// approverPublicKey returns the approvers' public key named by
// approval.public_key_file, or nil when none is configured.
func approverPublicKey(cfg config) (ed25519.PublicKey, error) {
	path := cfg.Approval.PublicKeyFile
	if path == "" {
		return nil, nil
	}
	k, err := readKey(path, "the approvers' public key", x509.ParsePKIXPublicKey)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, keyError(path, "the approvers' public key", "not an Ed25519 public key")
	}
	return pub, nil
}

// signingKey returns the approver's private key named by --signing-key or
// AVFS_APPROVER_SIGNING_KEY, or nil when neither is given.
func signingKey(c *cli.Context) (ed25519.PrivateKey, error) {
	path := c.String("signing-key")
	if path == "" {
		path = os.Getenv("AVFS_APPROVER_SIGNING_KEY")
	}
	if path == "" {
		return nil, nil
	}
	k, err := readKey(path, "the signing key", x509.ParsePKCS8PrivateKey)
	if err != nil {
		return nil, err
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, keyError(path, "the signing key", "not an Ed25519 private key")
	}
	return priv, nil
}

// readKey reads the PEM file at path and parses its first block.
func readKey(path, what string, parse func([]byte) (any, error)) (any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, wire.Errorf(wire.CodeApproverKey, "read %s: %v", what, err).With("path", path)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, keyError(path, what, "not PEM")
	}
	k, err := parse(blk.Bytes)
	if err != nil {
		return nil, keyError(path, what, err.Error())
	}
	return k, nil
}

func keyError(path, what, problem string) error {
	return wire.Errorf(wire.CodeApproverKey, "%s %s: %s (make a key pair with avfs approval keygen)", what, path, problem).With("path", path)
}

// keygenResult is the JSON document of `avfs approval keygen`.
type keygenResult struct {
	SigningKey string `json:"signing_key"`
	PublicKey  string `json:"public_key"`
}

func approvalKeygenCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "keygen",
		Usage: "make an Ed25519 key pair for signing grants",
		UsageText: "avfs approval keygen FILE\n\n" +
			"Writes the private key to FILE (mode 0600) and the public key to FILE.pub, both PEM.\n" +
			"Name FILE.pub in approval.public_key_file of the config file of the runs; keep FILE\n" +
			"where the commands that runs start cannot read it, and grant with --signing-key FILE.\n\n" +
			"example: avfs approval keygen ~/.config/avfs-approver.pem",
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "FILE")
			if err != nil {
				return err
			}
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return wire.Errorf(wire.CodeInternal, "approval keygen: %w", err)
			}
			privDER, err := x509.MarshalPKCS8PrivateKey(priv)
			if err != nil {
				return wire.Errorf(wire.CodeInternal, "approval keygen: %w", err)
			}
			pubDER, err := x509.MarshalPKIXPublicKey(pub)
			if err != nil {
				return wire.Errorf(wire.CodeInternal, "approval keygen: %w", err)
			}
			res := keygenResult{SigningKey: a[0], PublicKey: a[0] + ".pub"}
			for _, f := range []struct {
				path string
				mode os.FileMode
				typ  string
				der  []byte
			}{{res.SigningKey, 0o600, "PRIVATE KEY", privDER}, {res.PublicKey, 0o644, "PUBLIC KEY", pubDER}} {
				if err := writeNew(f.path, f.mode, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})); err != nil {
					return err
				}
			}
			return e.emit(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "signing key %s\npublic key %s\n", res.SigningKey, res.PublicKey)
				return err
			})
		},
	}
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, mode os.FileMode, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, os.ErrExist) {
		return wire.Errorf(wire.CodeAlreadyExists, "approval keygen: %s already exists", path).With("path", path)
	}
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "approval keygen: %w", err).With("path", path)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return wire.Errorf(wire.CodeHostIO, "approval keygen: %w", err).With("path", path)
	}
	return nil
}

func approvalCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "approval",
		Usage: "list, show, grant and deny requests to run commands that need approval",
		UsageText: "avfs approval COMMAND [options]\n\n" +
			"A run that the policy sends for approval records a pending approval bound to\n" +
			"its exact command, directory, vault and policy revision. Grant it, then run\n" +
			"the same command again with --approval ID (once, before it expires).\n\n" +
			"example: avfs approval grant ap-1f2e3d4c5b6a7980 --reason \"ok, fetching deps\"",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Aliases:   []string{"ls"},
				Usage:     "list approvals, newest first",
				UsageText: "avfs approval list [--status pending|granted|denied|used|expired]\n\nexample: avfs approval list --status pending",
				Flags:     []cli.Flag{&cli.StringFlag{Name: "status", Usage: "only approvals with this `STATUS`"}},
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					return e.withVault(c, func(v *vault.Vault) error {
						as, err := v.Approvals(c.Context, c.String("status"))
						if err != nil {
							return err
						}
						return e.emit(approvalList{Vault: e.vaultName(), Approvals: as}, func(w io.Writer) error {
							rows := make([]string, 0, len(as))
							for _, a := range as {
								rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s", a.ID, a.Status, a.ExpiresAt.Local().Format(time.DateTime), approvalCommandText(a)))
							}
							return table(w, "ID\tSTATUS\tEXPIRES\tCOMMAND", rows)
						})
					})
				},
			},
			{
				Name:      "show",
				Usage:     "show one approval",
				UsageText: "avfs approval show ID\n\nexample: avfs approval show ap-1f2e3d4c5b6a7980",
				Action: func(c *cli.Context) error {
					a, err := args(c, 1, 1, "ID")
					if err != nil {
						return err
					}
					return e.withVault(c, func(v *vault.Vault) error {
						ap, err := v.Approval(c.Context, a[0])
						if err != nil {
							return err
						}
						return e.emit(ap, func(w io.Writer) error {
							_, err := fmt.Fprintf(w, "id:       %s\nstatus:   %s\ncommand:  %s\ncwd:      %s\nreasons:  %s\nexpires:  %s\n",
								ap.ID, ap.Status, approvalCommandText(ap), ap.Request.Cwd, strings.Join(ap.Request.Reasons, ", "), ap.ExpiresAt.Local().Format(time.DateTime))
							if err == nil && len(ap.Request.Env) > 0 {
								_, err = fmt.Fprintf(w, "env:      %s\n", strings.Join(ap.Request.Env, " "))
							}
							if err == nil && ap.Request.Readonly {
								_, err = fmt.Fprintf(w, "readonly: yes (the run cannot change the vault)\n")
							}
							return err
						})
					})
				},
			},
			approvalDecideCommand(e, true),
			approvalDecideCommand(e, false),
			approvalKeygenCommand(e),
		},
	}
}

// settle does what the decided approval ap of vault v asks of held or
// previewed changes (vault.Store.SettleApproval): through the avfs that
// serves v as a workspace when one does (it alone may change the vault it
// keeps mounted, and makes the mount forget what it cached), else here.
func (e *env) settle(ctx context.Context, v *vault.Vault, ap vault.Approval) ([]wire.Change, error) {
	info, err := v.Info(ctx)
	if err != nil {
		return nil, err
	}
	ws, err := workspace.Registry{Home: e.home}.ForVault(info.Name)
	if err != nil {
		return nil, err
	}
	if ws != nil {
		res, err := serverSettle(ctx, ws.Socket, wire.SettleRequest{Vault: info.Name, Approval: ap.ID})
		return res.Applied, err
	}
	store, err := e.store()
	if err != nil {
		return nil, err
	}
	return store.SettleApproval(ctx, v, ap, nil)
}

// approvalDecided is what `approval grant|deny --json` prints: the
// approval, and for a grant of held changes the changes it applied.
type approvalDecided struct {
	vault.Approval
	Applied []wire.Change `json:"applied,omitempty"`
}

func approvalDecideCommand(e *env, grant bool) *cli.Command {
	name, usage := "deny", "deny a pending approval"
	flags := []cli.Flag{&cli.StringFlag{Name: "reason", Usage: "why, for the audit log"}}
	text := fmt.Sprintf("avfs approval %s ID [--reason TEXT]\n\nexample: avfs approval %s ap-1f2e3d4c5b6a7980 --reason \"checked\"", name, name)
	if grant {
		name, usage = "grant", "grant a pending approval (signed when approvers are configured)"
		flags = append(flags, &cli.StringFlag{Name: "signing-key", Usage: "sign the grant with the Ed25519 private key in `FILE` (default $AVFS_APPROVER_SIGNING_KEY)"})
		text = "avfs approval grant ID [--reason TEXT] [--signing-key FILE]\n\n" +
			"When the config names approval.public_key_file, the grant must be signed with the\n" +
			"matching private key; with an approver secret (AVFS_APPROVER_KEY, approval.key_file)\n" +
			"it carries the secret's MAC.\n\n" +
			"example: avfs approval grant ap-1f2e3d4c5b6a7980 --reason \"checked\""
	}
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		UsageText: text,
		Flags:     flags,
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "ID")
			if err != nil {
				return err
			}
			cfg, err := loadConfig(e.home)
			if err != nil {
				return err
			}
			var prove func(ap vault.Approval) (string, error)
			if grant {
				if prove, err = grantProof(c, cfg); err != nil {
					return err
				}
			}
			return e.withVault(c, func(v *vault.Vault) error {
				ap, err := v.Approval(c.Context, a[0])
				if err != nil {
					return err
				}
				proof := ""
				if prove != nil {
					if proof, err = prove(ap); err != nil {
						return err
					}
				}
				ap, err = v.DecideApproval(c.Context, ap.ID, grant, c.String("reason"), "cli:"+cliUser(), proof)
				if err != nil {
					return err
				}
				out := approvalDecided{Approval: ap}
				if ap.Request.Held != nil || ap.Request.Preview != nil {
					// Held or previewed changes are applied now (granted),
					// exactly as the run left them: nothing runs again; a
					// denied preview's fork goes.
					applied, err := e.settle(c.Context, v, ap)
					if err != nil {
						return err
					}
					if ap, err = v.Approval(c.Context, ap.ID); err != nil {
						return err
					}
					out = approvalDecided{Approval: ap}
					if grant {
						out.Applied = applied
					}
				}
				return e.emit(out, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "%s %s\n", ap.ID, ap.Status)
					if err == nil && out.Applied != nil {
						_, err = fmt.Fprintf(w, "applied the %d change(s) the run made\n", len(out.Applied))
					}
					return err
				})
			})
		},
	}
}

// grantProof returns what proves a grant, as runs will check it: a
// signature when the approvers' public key is configured (checked against
// it here, so a wrong key fails now rather than at the run), else the
// approver secret's MAC, else a signature when a signing key is given
// anyway, else nothing.
func grantProof(c *cli.Context, cfg config) (func(vault.Approval) (string, error), error) {
	pub, err := approverPublicKey(cfg)
	if err != nil {
		return nil, err
	}
	priv, err := signingKey(c)
	if err != nil {
		return nil, err
	}
	if pub != nil {
		if priv == nil {
			return nil, wire.Errorf(wire.CodeApproverKey, "grants must be signed: the config names the approvers' public key %s; give the private key with --signing-key FILE or AVFS_APPROVER_SIGNING_KEY", cfg.Approval.PublicKeyFile)
		}
		if !pub.Equal(priv.Public()) {
			return nil, wire.Errorf(wire.CodeApproverKey, "the signing key does not match the approvers' public key %s", cfg.Approval.PublicKeyFile)
		}
		return func(ap vault.Approval) (string, error) { return runner.GrantSignature(priv, ap.ID, ap.Digest), nil }, nil
	}
	key, err := approverKey(cfg, true)
	if err != nil {
		return nil, err
	}
	switch {
	case len(key) > 0:
		return func(ap vault.Approval) (string, error) { return runner.GrantMAC(key, ap.ID, ap.Digest), nil }, nil
	case priv != nil:
		return func(ap vault.Approval) (string, error) { return runner.GrantSignature(priv, ap.ID, ap.Digest), nil }, nil
	}
	return nil, nil
}

func approvalCommandText(a vault.Approval) string {
	if a.Request.Shell != "" {
		return "sh -c " + a.Request.Shell
	}
	return strings.Join(a.Request.Argv, " ")
}
