package main

import (
	"fmt"
	"io"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/vault"
	"avfs/wire"
)

// findFilter is one test of `avfs find`; an entry is printed when all pass.
type findFilter func(en vault.Entry) bool

func vaultFindCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "find",
		Usage: "list the entries of the vault that match filters, without mounting",
		UsageText: "avfs find [PATH] [-name GLOB] [-path GLOB] [-type f|d|l|p|s] [-size [+-]N[c|k|M|G]] [-mtime [+-]DAYS] [-newer FILE] [-tag TAG] [-meta KEY[=VALUE]]\n\n" +
			"As find(1): -name matches the last element, -path the whole path (* crosses /);\n" +
			"-size +N is more than N, -N less, N exactly (k, M, G round up as find does;\n" +
			"-tag and -meta select by avfs tag and avfs meta (each may be given more than once: all must hold);\n" +
			"no suffix means bytes); -mtime counts whole days of age.\n" +
			"Text output prints each path as it is found; --json prints one document.\n\n" +
			"example: avfs find /src -name '*.go' -size +10k",
		Flags: findFlags(),
		Action: func(c *cli.Context) error {
			a, err := args(c, 0, 1, "[PATH]")
			if err != nil {
				return err
			}
			if err := e.vaultPaths(a); err != nil {
				return err
			}
			root := "/"
			if len(a) == 1 {
				root = a[0]
			}
			return e.withVault(c, func(v *vault.Vault) error {
				filters, err := findFilters(c, v, time.Now())
				if err != nil {
					return err
				}
				res := wire.FindResult{Kind: wire.FindResultKind, Vault: e.vaultName(), Root: root, RootB64: wire.B64(root), Matches: []wire.FindMatch{}}
				err = v.Walk(c.Context, root, func(en vault.Entry) error {
					for _, f := range filters {
						if !f(en) {
							return nil
						}
					}
					if !e.json { // streamed: nothing is kept
						_, err := fmt.Fprintln(e.stdout, en.Path)
						return err
					}
					res.Matches = append(res.Matches, wire.FindMatch{Path: en.Path, PathB64: en.PathB64, Type: en.Kind.String(), Size: en.Size,
						Mode: en.Mode.String(), Mtime: en.Mtime.UTC().Format(time.RFC3339), Target: en.Target, TargetB64: en.TargetB64})
					return nil
				})
				if err != nil || !e.json {
					return err
				}
				res.Total = len(res.Matches)
				return e.emit(res, func(io.Writer) error { return nil })
			})
		},
	}
}

// findFlags are the filters of `avfs find`, which `avfs grep` shares.
func findFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "name", Usage: "last path element matches `GLOB`"},
		&cli.StringFlag{Name: "path", Usage: "whole path matches `GLOB`"},
		&cli.StringFlag{Name: "type", Usage: "entry type: f (file), d (dir), l (symlink), p (fifo), s (socket)"},
		&cli.StringFlag{Name: "size", Usage: "size `[+-]N[c|k|M|G]`"},
		&cli.StringFlag{Name: "mtime", Usage: "modified `[+-]DAYS` ago"},
		&cli.StringFlag{Name: "newer", Usage: "modified after vault `FILE`"},
		&cli.StringSliceFlag{Name: "tag", Usage: "has tag `TAG` (avfs tag)"},
		&cli.StringSliceFlag{Name: "meta", Usage: "has metadata `KEY[=VALUE]` (avfs meta)"},
	}
}

// findFilters turns the flags given into tests; a malformed value is a usage error.
func findFilters(c *cli.Context, v *vault.Vault, now time.Time) ([]findFilter, error) {
	var fs []findFilter
	if g := c.String("name"); c.IsSet("name") {
		if _, err := path.Match(g, ""); err != nil {
			return nil, usageError("find: -name %q: %v", g, err)
		}
		fs = append(fs, func(en vault.Entry) bool { ok, _ := path.Match(g, en.Name); return ok })
	}
	if g := c.String("path"); c.IsSet("path") {
		re, err := globRegexp(g)
		if err != nil {
			return nil, usageError("find: -path %q: %v", g, err)
		}
		fs = append(fs, func(en vault.Entry) bool { return re.MatchString(en.Path) })
	}
	if t := c.String("type"); c.IsSet("type") {
		kinds := map[string]vault.Kind{"f": vault.KindFile, "d": vault.KindDir, "l": vault.KindSymlink, "p": vault.KindFifo, "s": vault.KindSocket}
		k, ok := kinds[t]
		if !ok {
			return nil, usageError("find: -type %q: want f, d, l, p or s", t)
		}
		fs = append(fs, func(en vault.Entry) bool { return en.Kind == k })
	}
	if s := c.String("size"); c.IsSet("size") {
		cmp, n, unit, err := parseFindNumber(s, map[string]int64{"": 1, "c": 1, "k": 1 << 10, "M": 1 << 20, "G": 1 << 30})
		if err != nil {
			return nil, usageError("find: -size %q: %v", s, err)
		}
		fs = append(fs, func(en vault.Entry) bool {
			return cmp(int64(math.Ceil(float64(en.Size)/float64(unit))), n)
		})
	}
	if s := c.String("mtime"); c.IsSet("mtime") {
		cmp, n, _, err := parseFindNumber(s, map[string]int64{"": 1})
		if err != nil {
			return nil, usageError("find: -mtime %q: %v", s, err)
		}
		fs = append(fs, func(en vault.Entry) bool {
			return cmp(int64(now.Sub(en.Mtime)/(24*time.Hour)), n)
		})
	}
	if tags, meta := c.StringSlice("tag"), c.StringSlice("meta"); len(tags)+len(meta) > 0 {
		ctx := c.Context
		fs = append(fs, func(en vault.Entry) bool {
			l, err := v.EntryLabels(ctx, en)
			if err != nil {
				return false
			}
			for _, t := range tags {
				if !slices.Contains(l.Tags, t) {
					return false
				}
			}
			for _, kv := range meta {
				k, want, withValue := strings.Cut(kv, "=")
				got, ok := l.Meta[k]
				if !ok || withValue && got != want {
					return false
				}
			}
			return true
		})
	}
	if p := c.String("newer"); c.IsSet("newer") {
		ref, err := v.Stat(c.Context, p)
		if err != nil {
			return nil, err
		}
		fs = append(fs, func(en vault.Entry) bool { return en.Mtime.After(ref.Mtime) })
	}
	return fs, nil
}

// parseFindNumber reads find's [+-]N[unit]: the comparison, N and the unit's size.
func parseFindNumber(s string, units map[string]int64) (cmp func(got, n int64) bool, n, unit int64, err error) {
	cmp = func(got, n int64) bool { return got == n }
	switch {
	case strings.HasPrefix(s, "+"):
		cmp, s = func(got, n int64) bool { return got > n }, s[1:]
	case strings.HasPrefix(s, "-"):
		cmp, s = func(got, n int64) bool { return got < n }, s[1:]
	}
	digits := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit, ok := units[s[len(digits):]]
	if !ok {
		return nil, 0, 0, fmt.Errorf("unknown unit %q", s[len(digits):])
	}
	n, err = strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("want [+-]N")
	}
	return cmp, n, unit, nil
}

// globRegexp compiles a find -path glob: * and ? match any characters,
// / included; [...] is a class.
func globRegexp(g string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch ch := g[i]; ch {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unterminated [")
			}
			class := g[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		case '\\':
			if i+1 < len(g) {
				i++
			}
			b.WriteString(regexp.QuoteMeta(string(g[i])))
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}
