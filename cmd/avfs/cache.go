package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/runner"
	"avfs/sandbox"
	"avfs/vault"
	"avfs/wire"
)

func cacheCommand(e *env) *cli.Command {
	action := func(clear bool) cli.ActionFunc {
		return func(c *cli.Context) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			rep, err := runCache(c.Context, cacheOptions{home: e.home, vault: e.vaultName(), clear: clear})
			if err != nil {
				return err
			}
			return e.emit(rep, func(w io.Writer) error { return printCache(w, rep) })
		}
	}
	return &cli.Command{
		Name:  "cache",
		Usage: "show or clear a vault's tool cache (~/.cache in its runs' sandboxes)",
		UsageText: "avfs cache show|clear\n\n" +
			"A vault's runs keep Go's, npm's and pip's caches between runs in $AVFS_HOME/cache/VAULT,\n" +
			"outside the vault's history; after each run it is trimmed to sandbox.cache_size.\n\n" +
			"example: avfs cache clear --vault work",
		Subcommands: []*cli.Command{
			{Name: "show", Usage: "what the cache holds, by tool", UsageText: "avfs cache show", Action: action(false)},
			{Name: "clear", Usage: "empty the cache", UsageText: "avfs cache clear", Action: action(true)},
		},
	}
}

type cacheOptions struct {
	home, vault string
	clear       bool
}

// runCache measures (and with clear, empties) the cache of opts.vault.
func runCache(_ context.Context, opts cacheOptions) (wire.CacheReport, error) {
	cfg, err := loadConfig(opts.home)
	if err != nil {
		return wire.CacheReport{}, err
	}
	e := &env{home: opts.home}
	sb, err := e.sandboxOf(cfg)
	if err != nil {
		return wire.CacheReport{}, err
	}
	rep := wire.CacheReport{Vault: opts.vault, Dir: filepath.Join(sb.CacheDir, opts.vault), MaxBytes: sb.CacheMax, Entries: []wire.CacheEntry{}}
	if rep.MaxBytes == 0 {
		rep.MaxBytes = runner.DefaultCacheMax
	}
	if err := vault.ValidName(opts.vault); err != nil {
		return rep, err
	}
	if opts.clear {
		if err := sandbox.ClearCache(rep.Dir); err != nil {
			return rep, err
		}
		rep.Cleared = true
	}
	ents, err := sandbox.CacheEntries(rep.Dir)
	if err != nil {
		return rep, err
	}
	for _, ce := range ents {
		rep.Bytes += ce.Bytes
		rep.Entries = append(rep.Entries, wire.CacheEntry{Name: ce.Name, Bytes: ce.Bytes, Modified: time.Unix(0, ce.MTime).UTC().Format(time.RFC3339)})
	}
	return rep, nil
}

func printCache(w io.Writer, rep wire.CacheReport) error {
	if rep.Cleared {
		fmt.Fprintf(w, "cleared %s\n", rep.Dir)
	}
	fmt.Fprintf(w, "cache of %s: %s of %s (%s)\n", rep.Vault, humanSize(rep.Bytes), humanSize(rep.MaxBytes), rep.Dir)
	rows := make([]string, 0, len(rep.Entries))
	for _, ce := range rep.Entries {
		rows = append(rows, ce.Name+"\t"+humanSize(ce.Bytes)+"\t"+ce.Modified)
	}
	if len(rows) == 0 {
		return nil
	}
	return table(w, "TOOL\tSIZE\tMODIFIED", rows)
}
