package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/vault"
	"avfs/wire"
)

// retentionString says a vault's retention settings in a line.
func retentionString(r vault.Retention) string {
	if r.Off() {
		return "off: every version is kept (avfs prune and avfs gc remove by hand)"
	}
	var parts []string
	if r.Versions > 0 {
		parts = append(parts, fmt.Sprintf("at most %d versions per file", r.Versions))
	}
	if r.MaxAgeS > 0 {
		parts = append(parts, "none older than "+ageString(r.MaxAgeS))
	}
	if r.HistoryPct > 0 {
		parts = append(parts, fmt.Sprintf("history within %d%% of the live data (at least %d MiB)", r.HistoryPct, r.HistoryMinMB))
	}
	return strings.Join(parts, ", ")
}

// ageString writes seconds as days, hours, minutes or seconds, whichever
// is exact.
func ageString(s int64) string {
	d := time.Duration(s) * time.Second
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return strconv.FormatInt(s, 10) + "s"
}

// retentionKeys are the settings `retention set` takes, as KEY VALUE pairs
// or as flags (the key with dashes).
var retentionKeys = []string{"versions", "max_age", "history_pct", "history_min_mb", "decisions", "decisions_max_age"}

// decisionChange is what `retention set` changes of the limits on
// recorded decisions (nil keeps a setting).
type decisionChange struct {
	max, maxAgeS *int64
}

// retentionChange reads the settings given to `retention set`.
func retentionChange(c *cli.Context) (vault.RetentionChange, decisionChange, error) {
	var rc vault.RetentionChange
	var dc decisionChange
	if err := setKeyValues(c, "retention set", retentionKeys); err != nil {
		return rc, dc, err
	}
	if c.IsSet("decisions") {
		n := c.Int64("decisions")
		dc.max = &n
	}
	if c.IsSet("decisions-max-age") {
		s, err := ageSeconds(c.String("decisions-max-age"), "--decisions-max-age")
		if err != nil {
			return rc, dc, err
		}
		dc.maxAgeS = &s
	}
	for flag, dst := range map[string]**int64{"versions": &rc.Versions, "history-pct": &rc.HistoryPct, "history-min-mb": &rc.HistoryMinMB} {
		if c.IsSet(flag) {
			n := c.Int64(flag)
			*dst = &n
		}
	}
	if c.IsSet("max-age") {
		s, err := ageSeconds(c.String("max-age"), "--max-age")
		if err != nil {
			return rc, dc, err
		}
		rc.MaxAgeS = &s
	}
	if rc == (vault.RetentionChange{}) && dc == (decisionChange{}) {
		return rc, dc, usageError("retention set: give at least one of --versions, --max-age, --history-pct, --history-min-mb, --decisions, --decisions-max-age")
	}
	return rc, dc, nil
}

// ageSeconds reads an age flag: a duration (7d, 36h), or 0 or off for no limit.
func ageSeconds(a, flag string) (int64, error) {
	if a == "0" || a == "off" {
		return 0, nil
	}
	d, err := parseAge(a)
	if err != nil {
		return 0, usageError("retention set: %s: %v (0 or off: no limit)", flag, err)
	}
	s := int64(d / time.Second)
	if s == 0 {
		return 0, usageError("retention set: %s: %q is less than a second", flag, a)
	}
	return s, nil
}

func retentionCommand(e *env) *cli.Command {
	show := func(c *cli.Context, name string, v *vault.Vault) error {
		res, err := v.RetentionStatus(c.Context)
		if err != nil {
			return err
		}
		res.Vault = name
		lim, err := v.DecisionLimits(c.Context)
		if err != nil {
			return err
		}
		n, err := v.CountDecisions(c.Context)
		if err != nil {
			return err
		}
		res.Decisions = wire.DecisionRetention{Max: lim.Max, MaxAgeS: lim.MaxAgeS, Recorded: n}
		return e.emit(res, func(w io.Writer) error {
			budget := "no byte budget"
			if res.BudgetBytes > 0 {
				budget = "history budget " + humanSize(res.BudgetBytes)
			}
			age := "of any age"
			if d := res.Decisions; d.MaxAgeS > 0 {
				age = "none older than " + ageString(d.MaxAgeS)
			}
			_, err := fmt.Fprintf(w, "retention: %s\nstored: %s for %s of live data (%s); %d versions\ndecisions: %d recorded, at most %d, %s\n",
				retentionString(res.Retention), humanSize(res.StoredBytes), humanSize(res.LiveBytes), budget, res.Versions,
				res.Decisions.Recorded, res.Decisions.Max, age)
			return err
		})
	}
	change := func(c *cli.Context, rc vault.RetentionChange, dc decisionChange) error {
		name := e.vaultName()
		return e.withNamed(c, name, func(v *vault.Vault) error {
			if rc != (vault.RetentionChange{}) {
				if _, err := v.SetRetention(c.Context, rc); err != nil {
					return err
				}
			}
			if dc != (decisionChange{}) {
				if _, err := v.SetDecisionLimits(c.Context, dc.max, dc.maxAgeS); err != nil {
					return err
				}
			}
			return show(c, name, v)
		})
	}
	settings := func(r wire.VaultRetention) vault.RetentionChange {
		return vault.RetentionChange{Versions: &r.Versions, MaxAgeS: &r.MaxAgeS, HistoryPct: &r.HistoryPct, HistoryMinMB: &r.HistoryMinMB}
	}
	def, defDecisions := vault.DefaultRetention(), vault.DefaultDecisionLimits()
	return &cli.Command{
		Name:  "retention",
		Usage: "show or set how much file history the vault keeps",
		UsageText: "avfs retention show|set|reset|off [options]\n\n" +
			"Every write records a version of the file. The vault thins that history by itself: in the\n" +
			"background while it is mounted, at the end of each run, and in avfs gc. A version goes when\n" +
			"it is not among the newest --versions of its file, when it is older than --max-age (so is the\n" +
			"whole history of a file deleted that long ago), or, oldest first, while the data only history\n" +
			"holds is above --history-pct of the live data (at least --history-min-mb). Never removed: a\n" +
			"live file's current version, a version a checkpoint holds, a deleted file still open.\n" +
			"It also bounds the policy decisions the vault records for avfs policy replay: the newest\n" +
			"--decisions, none older than --decisions-max-age; reset restores those too, off leaves them.\n\n" +
			"example: avfs retention set --versions 10 --max-age 7d\nexample: avfs retention set history_pct 100",
		Subcommands: []*cli.Command{
			{
				Name:      "show",
				Usage:     "show the settings and how much the vault stores",
				UsageText: "avfs retention show\n\nexample: avfs retention show --vault work --json",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					name := e.vaultName()
					return e.withNamed(c, name, func(v *vault.Vault) error { return show(c, name, v) })
				},
			},
			{
				Name:  "set",
				Usage: "change settings (0 turns a rule off); others are kept",
				UsageText: "avfs retention set [--versions N] [--max-age DURATION] [--history-pct P] [--history-min-mb N]\n" +
					"avfs retention set [--decisions N] [--decisions-max-age DURATION]\n" +
					"avfs retention set KEY VALUE [KEY VALUE ...]   (KEY: " + strings.Join(retentionKeys, ", ") + ")\n\n" +
					"example: avfs retention set --versions 10\nexample: avfs retention set max_age 14d",
				Flags: []cli.Flag{
					&cli.Int64Flag{Name: "versions", Usage: fmt.Sprintf("keep at most `N` versions per file (default %d; 0: no limit)", def.Versions)},
					&cli.StringFlag{Name: "max-age", Usage: fmt.Sprintf("remove versions older than `DURATION` (7d, 36h; default %s; 0: no limit)", ageString(def.MaxAgeS))},
					&cli.Int64Flag{Name: "history-pct", Usage: fmt.Sprintf("bound the data only history holds to `P` percent of the live data (default %d; 0: no bound)", def.HistoryPct)},
					&cli.Int64Flag{Name: "history-min-mb", Usage: fmt.Sprintf("but allow history at least `N` MiB (default %d)", def.HistoryMinMB)},
					&cli.Int64Flag{Name: "decisions", Usage: fmt.Sprintf("keep at most the newest `N` policy decisions for avfs policy replay (default %d; 0: record none)", defDecisions.Max)},
					&cli.StringFlag{Name: "decisions-max-age", Usage: fmt.Sprintf("remove decisions older than `DURATION` (default %s; 0: no limit)", ageString(defDecisions.MaxAgeS))},
				},
				Action: func(c *cli.Context) error {
					rc, dc, err := retentionChange(c)
					if err != nil {
						return err
					}
					return change(c, rc, dc)
				},
			},
			{
				Name:      "reset",
				Usage:     "go back to the default settings",
				UsageText: "avfs retention reset\n\nexample: avfs retention reset --vault work",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					return change(c, settings(def), decisionChange{max: &defDecisions.Max, maxAgeS: &defDecisions.MaxAgeS})
				},
			},
			{
				Name:      "off",
				Usage:     "keep every version (avfs prune and avfs gc still remove data by hand)",
				UsageText: "avfs retention off\n\nexample: avfs retention off --vault audit-trail",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					return change(c, settings(wire.VaultRetention{}), decisionChange{})
				},
			},
		},
	}
}
