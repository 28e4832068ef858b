package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/vault"
	"avfs/wire"
)

// grepMaxLine is the longest line grep reads; a file with a longer one is
// searched up to it, and said so on stderr.
const grepMaxLine = 4 << 20

// grepBinaryPeek is how much of a file decides that it is binary (a NUL
// byte), as grep(1) does.
const grepBinaryPeek = 8 << 10

func grepCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "grep",
		Usage: "search the content of a vault's files without mounting",
		UsageText: "avfs grep [-i] [-F] [-w] [-v] [-n] [-l|-c] [-m N] [find filters] PATTERN [PATH...]\n\n" +
			"PATTERN is a regular expression (RE2 syntax, as Go's regexp), or a fixed string with -F.\n" +
			"PATHs are files or directories of the vault (default /), searched recursively; the filters of\n" +
			"avfs find (-name, -path, -size, -mtime, -newer, -tag, -meta) select the files.\n" +
			"A file with a NUL byte in its first 8 KiB is binary: \"Binary file PATH matches\".\n" +
			"Exit status: 0 when a line matched, 1 when none did, 2 on a usage error.\n\n" +
			"example: avfs grep -n -name '*.go' 'TODO|FIXME' /src",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "i", Usage: "ignore case"},
			&cli.BoolFlag{Name: "F", Usage: "PATTERN is a fixed string"},
			&cli.BoolFlag{Name: "w", Usage: "match whole words only"},
			&cli.BoolFlag{Name: "v", Usage: "select lines that do not match"},
			&cli.BoolFlag{Name: "n", Usage: "print line numbers"},
			&cli.BoolFlag{Name: "l", Usage: "print only the paths of files with matches"},
			&cli.BoolFlag{Name: "c", Usage: "print only a count of matching lines per file"},
			&cli.IntFlag{Name: "m", Usage: "stop reading a file after `N` matching lines (0: no limit)"},
		}, findFlags()...),
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, -1, "PATTERN [PATH...]")
			if err != nil {
				return err
			}
			if err := e.vaultPaths(a[1:]); err != nil {
				return err
			}
			re, err := grepPattern(a[0], c.Bool("F"), c.Bool("i"), c.Bool("w"))
			if err != nil {
				return err
			}
			roots := a[1:]
			if len(roots) == 0 {
				roots = []string{"/"}
			}
			return e.withVault(c, func(v *vault.Vault) error {
				filters, err := findFilters(c, v, time.Now())
				if err != nil {
					return err
				}
				g := &grepRun{e: e, v: v, re: re, invert: c.Bool("v"), numbers: c.Bool("n"), names: c.Bool("l"), count: c.Bool("c"),
					max: c.Int("m"), many: len(roots) > 1,
					res: wire.GrepResult{Kind: wire.GrepResultKind, Vault: e.vaultName(), Pattern: a[0], Matches: []wire.GrepMatch{}, Files: []wire.GrepFile{}}}
				for _, root := range roots {
					err := v.Walk(c.Context, root, func(en vault.Entry) error {
						if en.Kind != vault.KindFile {
							return nil
						}
						if en.Path != path.Clean("/"+root) {
							g.many = true // files found under a directory are named
						}
						for _, f := range filters {
							if !f(en) {
								return nil
							}
						}
						return g.file(c, en.Path)
					})
					if err != nil {
						return err
					}
				}
				if e.json {
					if err := e.emit(g.res, func(io.Writer) error { return nil }); err != nil {
						return err
					}
				}
				if len(g.res.Files) == 0 {
					return &exitStatus{code: 1}
				}
				return nil
			})
		},
	}
}

// grepPattern compiles PATTERN with grep's -F, -i and -w.
func grepPattern(p string, fixed, fold, word bool) (*regexp.Regexp, error) {
	if fixed {
		p = regexp.QuoteMeta(p)
	}
	if word {
		p = `\b(?:` + p + `)\b`
	}
	if fold {
		p = `(?i)` + p
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, usageError("grep: pattern: %v", err)
	}
	return re, nil
}

// grepRun is one `avfs grep`: what it looks for and what it found.
type grepRun struct {
	e                             *env
	v                             *vault.Vault
	re                            *regexp.Regexp
	invert, numbers, names, count bool
	max                           int
	many                          bool // paths are printed before lines
	res                           wire.GrepResult
}

// file searches the file at p, streaming it (never whole in memory), and
// prints (text) or records (--json) what it finds.
func (g *grepRun) file(c *cli.Context, p string) error {
	r, err := g.v.OpenFile(c.Context, p)
	if err != nil {
		return err
	}
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	peek, _ := br.Peek(grepBinaryPeek)
	binary := bytes.IndexByte(peek, 0) >= 0
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64<<10), grepMaxLine)
	n, line := 0, 0
	var matches []wire.GrepMatch
	for sc.Scan() {
		line++
		if g.re.Match(sc.Bytes()) == g.invert {
			continue
		}
		n++
		if !binary && !g.names && !g.count {
			matches = append(matches, wire.GrepMatch{Path: p, PathB64: wire.B64(p), Line: line, Text: strings.ToValidUTF8(sc.Text(), "\uFFFD")})
			if !g.e.json {
				if err := g.printLine(p, line, sc.Text()); err != nil {
					return err
				}
				matches = matches[:0]
			}
		}
		if g.max > 0 && n >= g.max || (g.names || binary) && !g.count {
			break // the rest changes nothing printed
		}
	}
	if err := sc.Err(); err != nil {
		if !errors.Is(err, bufio.ErrTooLong) {
			return err
		}
		fmt.Fprintf(g.e.stderr, "avfs grep: %s: a line longer than %d bytes: the rest of the file was not searched\n", p, grepMaxLine)
	}
	if n == 0 {
		return nil
	}
	g.res.Files = append(g.res.Files, wire.GrepFile{Path: p, PathB64: wire.B64(p), Matches: n, Binary: binary})
	g.res.Matches = append(g.res.Matches, matches...)
	g.res.Total += n
	if g.e.json {
		return nil
	}
	var err2 error
	switch {
	case g.count:
		if g.many {
			_, err2 = fmt.Fprintf(g.e.stdout, "%s:%d\n", p, n)
		} else {
			_, err2 = fmt.Fprintf(g.e.stdout, "%d\n", n)
		}
	case g.names:
		_, err2 = fmt.Fprintln(g.e.stdout, p)
	case binary:
		_, err2 = fmt.Fprintf(g.e.stdout, "Binary file %s matches\n", p)
	}
	return err2
}

// printLine prints one matching line as grep(1) does.
func (g *grepRun) printLine(p string, line int, text string) error {
	var b strings.Builder
	if g.many {
		b.WriteString(p)
		b.WriteByte(':')
	}
	if g.numbers {
		fmt.Fprintf(&b, "%d:", line)
	}
	b.WriteString(text)
	b.WriteByte('\n')
	_, err := io.WriteString(g.e.stdout, b.String())
	return err
}
