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
		UsageText: "avfs audit [--limit N] [--since TIME|DURATION]\n   avfs audit verify\n   avfs audit export --format jsonl|ocsf [--since TIME] [--all] [--out FILE]\n\nexample: avfs audit --since 1h --limit 20",
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
			auditExportCommand(e),
			{
				Name:  "verify",
				Usage: "verify the audit log: hash chain, MACs under the installation's audit key, checkpoint heads (exit 1 with integrity_failed when broken)",
				UsageText: "avfs audit verify\n\n" +
					"Checks that the rows follow each other and match their hashes, that each row's MAC is\n" +
					"the HMAC under $AVFS_HOME/keys/audit.key (rows written before the key existed are\n" +
					"counted as unanchored), and that the chain head each checkpoint recorded is unchanged.\n" +
					"Without the key (a vault from another machine) the MACs are not checked. Rows cut off\n" +
					"the end after the last checkpoint are not detected (docs/vault.md, \"Audit log\").\n\n" +
					"example: avfs audit verify --vault work --json",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					key, err := e.auditKey(false) // verify never makes a key
					if err != nil {
						return err
					}
					name := e.vaultName()
					v, err := vault.NewStore(e.home, vault.Options{Actor: "cli:" + cliUser(), AuditKey: key}).Open(c.Context, name)
					if err != nil {
						return err
					}
					defer v.Close()
					rep, err := v.VerifyAudit(c.Context)
					if err != nil {
						return err
					}
					rep.Vault = name
					if !rep.OK {
						if !e.json {
							for _, p := range rep.Problems {
								fmt.Fprintf(e.stdout, "%s\n", auditProblemLine(p))
							}
							if n := rep.ProblemsTotal - int64(len(rep.Problems)); n > 0 {
								fmt.Fprintf(e.stdout, "(%d more problems)\n", n)
							}
							printAuditCoverage(e.stdout, rep, e.home)
						}
						return rep.Err()
					}
					return e.emit(rep, func(w io.Writer) error {
						fmt.Fprintf(w, "audit log of %s: ok (%d entries)\n", name, rep.Entries)
						printAuditCoverage(w, rep, e.home)
						return nil
					})
				},
			},
		},
	}
}

// auditProblemLine is one problem of audit verify for people.
func auditProblemLine(p wire.AuditProblem) string {
	where := ""
	if p.Checkpoint != 0 {
		where = fmt.Sprintf("checkpoint %d: ", p.Checkpoint)
	} else if p.Row != 0 {
		where = fmt.Sprintf("row %d: ", p.Row)
	}
	return fmt.Sprintf("%s%s: %s", where, p.Reason, p.Message)
}

// printAuditCoverage says what audit verify could check.
func printAuditCoverage(w io.Writer, rep wire.AuditVerify, home string) {
	switch rep.MAC {
	case wire.AuditMACChecked:
		fmt.Fprintf(w, "MACs: checked with this installation's audit key; anchored from row %d (%d rows)", rep.AnchoredFrom, rep.Anchored)
	case wire.AuditMACNoKey:
		fmt.Fprintf(w, "MACs: not checked: no audit key at %s (a vault from another machine?); %d rows carry one, from row %d", auditKeyPath(home), rep.Anchored, rep.AnchoredFrom)
	default:
		fmt.Fprintf(w, "MACs: none in the log: only the plain hash chain was checked")
	}
	if rep.Unanchored > 0 {
		fmt.Fprintf(w, "; %d unanchored rows before (written before the key existed)", rep.Unanchored)
	}
	fmt.Fprintf(w, "\ncheckpoint heads: %d checked\n", rep.Checkpoints)
}
