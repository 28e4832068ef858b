package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/vault"
	"avfs/wire"
)

// auditList is the JSON document of `avfs audit`.
type auditList struct {
	Vault   string             `json:"vault"`
	Entries []vault.AuditEntry `json:"entries"`
}

// auditVerifyResult is the JSON document of a passing `avfs audit verify`.
type auditVerifyResult struct {
	Vault string `json:"vault"`
	vault.AuditReport
}

// parseSince reads an RFC 3339 time or a duration meaning "that long ago".
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usageError("invalid --since %q: want an RFC 3339 time (2024-05-01T12:00:00Z) or a duration (1h, 30m)", s)
}

func auditCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "audit",
		Usage:     "show the vault's audit log (oldest first)",
		UsageText: "avfs audit [--limit N] [--since TIME|DURATION]\n   avfs audit verify\n\nexample: avfs audit --since 1h --limit 20",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "limit", Aliases: []string{"n"}, Usage: "only the newest `N` entries"},
			&cli.StringFlag{Name: "since", Usage: "entries at or after `TIME` (RFC 3339) or that long ago (1h)"},
		},
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			q := vault.AuditQuery{Limit: c.Int("limit")}
			if q.Limit < 0 {
				return usageError("invalid --limit %d: must be 0 (all) or positive", q.Limit)
			}
			if s := c.String("since"); s != "" {
				t, err := parseSince(s, time.Now())
				if err != nil {
					return err
				}
				q.Since = t
			}
			name := e.vaultName()
			return e.withNamed(c, name, func(v *vault.Vault) error {
				entries, err := v.Audit(c.Context, q)
				if err != nil {
					return err
				}
				return e.emit(auditList{Vault: name, Entries: entries}, func(w io.Writer) error {
					rows := make([]string, len(entries))
					for i, a := range entries {
						d, _ := json.Marshal(a.Details)
						rows[i] = fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s", a.ID, a.Time.Local().Format(timeFmt), a.Actor, a.Op, a.Path, d)
					}
					return table(w, "ID\tTIME\tACTOR\tOP\tPATH\tDETAILS", rows)
				})
			})
		},
		Subcommands: []*cli.Command{
			{
				Name:      "verify",
				Usage:     "verify the audit log's hash chain (exit 1 with integrity_failed when broken)",
				UsageText: "avfs audit verify\n\nexample: avfs audit verify --vault work --json",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					name := e.vaultName()
					return e.withNamed(c, name, func(v *vault.Vault) error {
						rep, err := v.VerifyAudit(c.Context)
						if err != nil {
							return err
						}
						if rep.OK {
							return e.emit(auditVerifyResult{Vault: name, AuditReport: rep}, func(w io.Writer) error {
								_, err := fmt.Fprintf(w, "audit log of %s: ok (%d entries)\n", name, rep.Entries)
								return err
							})
						}
						if !e.json {
							for _, p := range rep.Problems {
								fmt.Fprintf(e.stdout, "%s: %s\n", p.Check, p.Message)
							}
						}
						return wire.Errorf(wire.CodeIntegrity, "audit log of %s: %d problem(s)", name, len(rep.Problems)).
							With("vault", name).With("ok", false).With("entries", rep.Entries).With("problems", rep.Problems)
					})
				},
			},
		},
	}
}
