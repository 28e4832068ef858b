package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/vault"
	"avfs/wire"
)

func auditExportCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "export the audit log for a SIEM: one JSON object a line, jsonl (the rows as stored, chain fields included) or ocsf (OCSF 1.3 events)",
		UsageText: "avfs audit export --format jsonl|ocsf [--since TIME|DURATION] [--vault NAME | --all] [--out FILE]\n\n" +
			"Writes the audit rows of the selected vault (--vault), or of every vault (--all), oldest\n" +
			"first, one JSON object a line: --format jsonl gives each row as stored (id, time, op, path,\n" +
			"details, actor, prev_hash, hash, mac, and decision_id when the row has one), enough to\n" +
			"recompute the chain; --format ocsf gives OCSF 1.3 events (runs as Process Activity, files,\n" +
			"checkpoints and restores as File System Activity, the rest as Base Events), the row in\n" +
			"unmapped (docs/audit.md). --since keeps rows at or after TIME (RFC 3339, or a duration:\n" +
			"24h). Without --out the export is the output; --out FILE writes it to FILE (mode 0600,\n" +
			"replaced whole once complete) and prints a summary (--json: kind audit_export). The\n" +
			"export reads a snapshot of each log and writes nothing to the vaults.\n\n" +
			"example: avfs audit export --format ocsf --all --since 24h --out /var/log/avfs/audit.jsonl",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Required: true, Usage: "`FORMAT` of the lines: jsonl or ocsf"},
			&cli.StringFlag{Name: "since", Usage: "rows at or after `TIME` (RFC 3339) or that long ago (24h)"},
			&cli.BoolFlag{Name: "all", Usage: "export every vault of the store"},
			&cli.StringFlag{Name: "out", Usage: "write the export to `FILE` instead of stdout"},
		},
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			opts, err := e.auditExportOptionsOf(c)
			if err != nil {
				return err
			}
			res, err := runAuditExport(c.Context, opts)
			if err != nil || opts.out == "" {
				return err
			}
			return e.emit(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "exported %d events of %d vault(s) to %s (%s)\n", res.Events, len(res.Vaults), res.Out, res.Format)
				return err
			})
		},
	}
}

// auditExportOptions is what `avfs audit export` does.
type auditExportOptions struct {
	store  *vault.Store
	vaults []string  // in order
	out    string    // the file to write ("" for w)
	w      io.Writer // where the export goes without out
	export vault.AuditExportOptions
}

// auditExportOptionsOf reads the flags of `avfs audit export`.
func (e *env) auditExportOptionsOf(c *cli.Context) (auditExportOptions, error) {
	opts := auditExportOptions{store: e.readStore(), out: c.String("out"), w: e.stdout}
	f := wire.AuditExportFormat(c.String("format"))
	switch f {
	case wire.AuditExportJSONL, wire.AuditExportOCSF:
	default:
		return opts, usageError("unknown --format %q (want jsonl or ocsf)", f)
	}
	host, _ := os.Hostname()
	opts.export = vault.AuditExportOptions{Format: f, Hostname: host,
		Product: wire.OCSFProduct{Name: "avfs", VendorName: "avfs", Version: version}}
	if s := c.String("since"); s != "" {
		t, err := parseSince(s, time.Now())
		if err != nil {
			return opts, err
		}
		opts.export.Since = t
	}
	// --vault is avfs's own flag (or AVFS_VAULT): the vault selected.
	if c.Bool("all") {
		if e.vault != "" {
			return opts, usageError("audit export exports --vault NAME or --all: one of them")
		}
		var err error
		if opts.vaults, err = opts.store.Names(); err != nil {
			return opts, err
		}
	} else {
		opts.vaults = []string{e.vaultName()}
	}
	return opts, nil
}

// runAuditExport writes the audit logs of opts.vaults, one after the
// other, to opts.out (a temporary file renamed over it once complete: a
// failed export leaves the file as it was) or opts.w. A vault that does
// not exist is not_found; nothing is created.
func runAuditExport(ctx context.Context, opts auditExportOptions) (wire.AuditExport, error) {
	res := wire.AuditExport{Kind: wire.AuditExportKind, Format: opts.export.Format, Out: opts.out, Vaults: []string{}}
	w := opts.w
	var tmp *os.File
	if opts.out != "" {
		var err error
		tmp, err = os.CreateTemp(filepath.Dir(opts.out), "."+filepath.Base(opts.out)+".*")
		if err != nil {
			return res, wire.Errorf(wire.CodeHostIO, "audit export: %w", err)
		}
		defer func() {
			if tmp != nil {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		w = tmp
	}
	for _, name := range opts.vaults {
		v, err := opts.store.Open(ctx, name)
		if err != nil {
			return res, err
		}
		n, err := v.ExportAudit(ctx, w, opts.export)
		v.Close()
		res.Events += n
		if err != nil {
			return res, fmt.Errorf("audit export of %s: %w", name, err)
		}
		res.Vaults = append(res.Vaults, name)
	}
	if tmp != nil {
		if err := tmp.Sync(); err != nil {
			return res, wire.Errorf(wire.CodeHostIO, "audit export: %w", err)
		}
		if err := tmp.Close(); err != nil {
			return res, wire.Errorf(wire.CodeHostIO, "audit export: %w", err)
		}
		if err := os.Rename(tmp.Name(), opts.out); err != nil {
			return res, wire.Errorf(wire.CodeHostIO, "audit export: %w", err)
		}
		tmp = nil
	}
	return res, nil
}
