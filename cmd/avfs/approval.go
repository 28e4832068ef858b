package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/runner"
	"avfs/vault"
	"avfs/wire"
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
	if k := os.Getenv("AVFS_APPROVER_KEY"); k != "" {
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
							return err
						})
					})
				},
			},
			approvalDecideCommand(e, true),
			approvalDecideCommand(e, false),
		},
	}
}

func approvalDecideCommand(e *env, grant bool) *cli.Command {
	name, usage := "deny", "deny a pending approval"
	if grant {
		name, usage = "grant", "grant a pending approval (needs the approver secret when one is configured)"
	}
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		UsageText: fmt.Sprintf("avfs approval %s ID [--reason TEXT]\n\nexample: avfs approval %s ap-1f2e3d4c5b6a7980 --reason \"checked\"", name, name),
		Flags:     []cli.Flag{&cli.StringFlag{Name: "reason", Usage: "why, for the audit log"}},
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "ID")
			if err != nil {
				return err
			}
			cfg, err := loadConfig(e.home)
			if err != nil {
				return err
			}
			var key []byte
			if grant {
				if key, err = approverKey(cfg, true); err != nil {
					return err
				}
			}
			return e.withVault(c, func(v *vault.Vault) error {
				ap, err := v.Approval(c.Context, a[0])
				if err != nil {
					return err
				}
				mac := ""
				if len(key) > 0 {
					mac = runner.GrantMAC(key, ap.ID, ap.Digest)
				}
				ap, err = v.DecideApproval(c.Context, ap.ID, grant, c.String("reason"), "cli:"+cliUser(), mac)
				if err != nil {
					return err
				}
				return e.emit(ap, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "%s %s\n", ap.ID, ap.Status)
					return err
				})
			})
		},
	}
}

func approvalCommandText(a vault.Approval) string {
	if a.Request.Shell != "" {
		return "sh -c " + a.Request.Shell
	}
	return strings.Join(a.Request.Argv, " ")
}
