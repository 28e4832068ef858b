package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"avfs/linediff"
	"avfs/vault"
	"avfs/wire"
)

// diffTextLimit is the largest content avfs diff compares line by line,
// holding it whole in memory: a file with a side larger than this is
// reported as differing ("Files ... differ" with a note), as a binary one
// is, after its sides were compared as streams when they have one size.
const diffTextLimit = 8 << 20

// diffBinaryPeek is how much of a side decides that it is binary (a NUL
// byte), as git does.
const diffBinaryPeek = 8 << 10

func diffCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "diff",
		Usage: "show how the content of files differs between versions or checkpoints (unified diff)",
		UsageText: "avfs diff PATH [--from N] [--to M] [-U N] [--stat] [--exit-code]\n" +
			"avfs diff --checkpoint A [--to B] [PATH] [-U N] [--stat] [--exit-code]\n\n" +
			"With PATH alone: the file's latest version against the one before it (avfs log lists them);\n" +
			"--from N compares version N instead, --to M version M (default: the latest, its current\n" +
			"content). With --checkpoint: every file that differs between checkpoint A and checkpoint B\n" +
			"(default: the current state), limited to PATH (a directory or a file) when given.\n" +
			"The vault is read, not mounted. Output is the unified format of git diff, git apply reads it:\n" +
			"a file only on one side is against /dev/null, a mode change is noted (old mode / new mode), a\n" +
			"symbolic link's content is its target. A side with a NUL byte in its first 8 KiB, or that is\n" +
			"not UTF-8, is binary: \"Binary files a/x and b/x differ\" with their sizes, never its bytes. A side\n" +
			"larger than 8 MiB is not compared line by line: \"Files a/x and b/x differ\" with a note.\n" +
			"--stat prints a summary instead (with --json: the hunks are left out). Exit status: 0 whether or\n" +
			"not anything differs; with --exit-code, 1 when something does.\n\n" +
			"example: avfs diff /notes.txt --from 2\n" +
			"example: avfs diff --checkpoint before-refactor /src",
		Flags: []cli.Flag{
			&cli.Int64Flag{Name: "from", DefaultText: "the one before --to", Usage: "compare version `N` of PATH"},
			&cli.StringFlag{Name: "to", DefaultText: "the latest version; with --checkpoint the current state", Usage: "to version `M` of PATH, or with --checkpoint to checkpoint B"},
			&cli.StringFlag{Name: "checkpoint", Usage: "compare the vault from checkpoint `A` (id or name)"},
			&cli.IntFlag{Name: "unified", Aliases: []string{"U"}, Value: 3, Usage: "`N` unchanged lines around each change"},
			&cli.BoolFlag{Name: "stat", Usage: "print the files changed with their counts of inserted and deleted lines"},
			&cli.BoolFlag{Name: "exit-code", Usage: "exit 1 when anything differs"},
		},
		Action: func(c *cli.Context) error {
			opts, err := diffFlags(c)
			if err != nil {
				return err
			}
			return e.withVault(c, func(v *vault.Vault) error {
				files := []wire.DiffFile{}
				res, err := runDiff(c.Context, v, opts, func(f fileDiff) error {
					if e.json || opts.Stat {
						files = append(files, f.DiffFile)
						return nil
					}
					return outputErr(writeFileDiff(e.stdout, f)) // as found: no hunks are kept
				})
				if err != nil {
					return err
				}
				res.Vault, res.Files = e.vaultName(), files
				err = e.emit(res, func(w io.Writer) error {
					if opts.Stat {
						return outputErr(writeDiffStat(w, files, res.Stat))
					}
					return nil
				})
				if err != nil {
					return err
				}
				if c.Bool("exit-code") && res.Stat.Files > 0 {
					return &exitStatus{code: 1}
				}
				return nil
			})
		},
	}
}

// diffOptions is what avfs diff compares, and how.
type diffOptions struct {
	Path         string // versions: the file; checkpoints: the directory or file the diff is limited to ("": all)
	From, To     int64  // versions of Path (0: the defaults)
	Checkpoint   string // compare states of the vault from this checkpoint ("": versions of Path)
	ToCheckpoint string // with Checkpoint: the other one ("": the current state)
	Context      int    // unchanged lines around each change
	Stat         bool   // count lines, keep no hunks
}

// diffFlags reads the command line of avfs diff.
func diffFlags(c *cli.Context) (diffOptions, error) {
	opts := diffOptions{Checkpoint: c.String("checkpoint"), Context: c.Int("unified"), Stat: c.Bool("stat")}
	if opts.Context < 0 {
		return opts, usageError("diff: -U needs a count of 0 or more")
	}
	if c.IsSet("checkpoint") {
		if opts.Checkpoint == "" {
			return opts, usageError("diff: --checkpoint needs a checkpoint id or name")
		}
		if c.IsSet("from") {
			return opts, usageError("diff: --from is a version of PATH; with --checkpoint give --to B")
		}
		a, err := args(c, 0, 1, "[PATH]")
		if err != nil {
			return opts, err
		}
		if len(a) == 1 {
			opts.Path = a[0]
		}
		opts.ToCheckpoint = c.String("to")
		return opts, nil
	}
	a, err := args(c, 1, 1, "PATH")
	if err != nil {
		return opts, err
	}
	opts.Path, opts.From = a[0], c.Int64("from")
	if c.IsSet("from") && opts.From < 1 {
		return opts, usageError("diff: --from takes a version number (1 or more; see avfs log PATH)")
	}
	if c.IsSet("to") {
		n, err := strconv.ParseInt(c.String("to"), 10, 64)
		if err != nil || n < 1 {
			return opts, usageError("diff: --to takes a version number (1 or more; see avfs log PATH), or a checkpoint with --checkpoint")
		}
		opts.To = n
	}
	return opts, nil
}

// fileDiff is one file that differs: its wire form (without hunks) and
// its hunks.
type fileDiff struct {
	wire.DiffFile
	oldPath string // the path on the old side (Path's when the same)
	hunks   []linediff.Hunk
}

// runDiff compares what opts names and calls out with each file that
// differs, in path order, as it finds it: its hunks, and their wire form
// in Hunks unless opts.Stat. It returns the document of the whole diff but
// its Vault and Files (empty; out keeps them when it wants), with Stat the
// sum of the files out was given.
//
// It reads content through the vault's readers and holds one file's two
// sides at a time, each at most diffTextLimit, with their lines and the
// comparison's tables: some hundreds of bytes a line at worst (two 8 MiB
// sides of a million short lines each, edited throughout, allocated
// 0.4 GiB in all, measured). Larger sides are compared as streams, a MiB at a time. It fails as the
// vault's reads do (version_not_found for a version PATH does not have,
// checkpoint_not_found, not_found), and with out's error.
func runDiff(ctx context.Context, v *vault.Vault, opts diffOptions, out func(fileDiff) error) (wire.DiffResult, error) {
	res := wire.DiffResult{Kind: wire.DiffResultKind, Path: opts.Path, Context: opts.Context, Files: []wire.DiffFile{}}
	emit := func(f fileDiff) error {
		res.Stat.Files++
		res.Stat.Insertions += f.Insertions
		res.Stat.Deletions += f.Deletions
		f.Hunks = []wire.DiffHunk{}
		if !opts.Stat {
			f.Hunks = wireHunks(f.hunks)
		}
		return out(f)
	}
	if opts.Checkpoint != "" {
		if opts.Path == "" {
			res.Path = "/"
		}
		res.From = wire.DiffSide{State: wire.DiffStateCheckpoint, Checkpoint: opts.Checkpoint}
		res.To = wire.DiffSide{State: wire.DiffStateCurrent}
		if opts.ToCheckpoint != "" {
			res.To = wire.DiffSide{State: wire.DiffStateCheckpoint, Checkpoint: opts.ToCheckpoint}
		}
		err := v.DiffContent(ctx, opts.Checkpoint, opts.ToCheckpoint, opts.Path, func(c vault.ContentChange) error {
			if c.Kind != vault.KindFile && c.Kind != vault.KindSymlink {
				return nil // directories and special files have no content to compare
			}
			f := fileDiff{DiffFile: wire.DiffFile{Path: c.Path, Status: wire.DiffStatus(c.Op), Kind: c.Kind.String(),
				OldMode: c.ModeBefore, NewMode: c.ModeAfter, OldSize: c.SizeBefore, NewSize: c.SizeAfter}, oldPath: c.Path}
			differs, err := compareSides(&f, c.Before, c.After, opts.Context)
			if err != nil || !differs {
				return err
			}
			return emit(f)
		})
		return res, err
	}
	return res, diffVersions(ctx, v, opts, &res, emit)
}

// diffVersions compares two versions of opts.Path (see diffOptions) and
// calls emit with the file when they differ.
func diffVersions(ctx context.Context, v *vault.Vault, opts diffOptions, res *wire.DiffResult, emit func(fileDiff) error) error {
	vs, err := v.Log(ctx, opts.Path)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return wire.Errorf(wire.CodeVersionNotFound, "%s has no history (a directory has none: compare checkpoints with avfs diff --checkpoint A %s)", opts.Path, opts.Path).With("path", opts.Path)
	}
	pick := func(n int64) (int, error) {
		for i, ver := range vs {
			if ver.N == n {
				return i, nil
			}
		}
		return 0, wire.Errorf(wire.CodeVersionNotFound, "%s has no version %d (see avfs log %s)", opts.Path, n, opts.Path).
			With("path", opts.Path).With("version", n)
	}
	to := len(vs) - 1
	if opts.To != 0 {
		if to, err = pick(opts.To); err != nil {
			return err
		}
	}
	from := to - 1 // -1: none, the file had no version before
	if opts.From != 0 {
		if from, err = pick(opts.From); err != nil {
			return err
		}
	}
	res.Path = vs[to].Path
	res.To = wire.DiffSide{State: wire.DiffStateVersion, Version: vs[to].N}
	res.From = wire.DiffSide{State: wire.DiffStateNone}
	var a, b *vault.Version
	if from >= 0 {
		res.From = wire.DiffSide{State: wire.DiffStateVersion, Version: vs[from].N}
		if vs[from].Op != "delete" {
			a = &vs[from]
		}
	}
	if vs[to].Op != "delete" {
		b = &vs[to]
	}
	if a == nil && b == nil || from == to {
		return nil
	}
	open := func(ver *vault.Version) (*vault.FileReader, error) {
		if ver == nil {
			return nil, nil
		}
		return v.OpenVersion(ctx, opts.Path, ver.N)
	}
	ra, err := open(a)
	if err != nil {
		return err
	}
	if ra != nil {
		defer ra.Close()
	}
	rb, err := open(b)
	if err != nil {
		return err
	}
	if rb != nil {
		defer rb.Close()
	}
	var f fileDiff
	switch {
	case a == nil:
		f.Status, f.Path, f.oldPath = wire.DiffAdded, b.Path, b.Path
	case b == nil:
		f.Status, f.Path, f.oldPath = wire.DiffDeleted, a.Path, a.Path
	default:
		f.Status, f.Path, f.oldPath = wire.DiffModified, b.Path, a.Path
		if a.Path != b.Path {
			f.OldPath = a.Path
		}
	}
	for _, side := range []struct {
		ver  *vault.Version
		mode **wire.FileMode
		size **int64
	}{{a, &f.OldMode, &f.OldSize}, {b, &f.NewMode, &f.NewSize}} {
		if side.ver != nil {
			m, n := side.ver.Mode, side.ver.Size
			*side.mode, *side.size, f.Kind = &m, &n, side.ver.Kind.String()
		}
	}
	differs, err := compareSides(&f, ra, rb, opts.Context)
	if err != nil || !differs {
		return err
	}
	return emit(f)
}

// compareSides compares the content of a and b (nil: no such side) and
// fills f's counts and hunks, or its Binary or TooLarge. It says whether
// the file differs: in content, in mode, or by being on one side only.
func compareSides(f *fileDiff, a, b *vault.FileReader, context int) (bool, error) {
	differs := a == nil || b == nil || f.OldMode != nil && f.NewMode != nil && *f.OldMode != *f.NewMode
	if a != nil && b != nil && a.SameContent(b) {
		return differs, nil
	}
	if a != nil && a.Size() > diffTextLimit || b != nil && b.Size() > diffTextLimit {
		f.TooLarge = true
		if a != nil && b != nil && a.Size() == b.Size() {
			same, err := sameStream(a, b)
			if err != nil || same {
				return differs, err
			}
		}
		return true, nil
	}
	ta, err := readSide(a)
	if err != nil {
		return false, err
	}
	tb, err := readSide(b)
	if err != nil {
		return false, err
	}
	if a != nil && b != nil && ta == tb {
		return differs, nil
	}
	if isBinary(ta) || isBinary(tb) {
		f.Binary = true
		return true, nil
	}
	f.hunks = linediff.Diff(linediff.Split(ta), linediff.Split(tb), context)
	f.Deletions, f.Insertions = linediff.Count(f.hunks)
	return true, nil
}

// readSide reads r whole ("" for nil); r is at most diffTextLimit long.
func readSide(r *vault.FileReader) (string, error) {
	if r == nil {
		return "", nil
	}
	var b strings.Builder
	b.Grow(int(r.Size()))
	_, err := r.WriteTo(&b)
	return b.String(), err
}

// sameStream compares a and b, of the same size, a buffer at a time.
func sameStream(a, b *vault.FileReader) (bool, error) {
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		na, erra := io.ReadFull(a, ba)
		nb, errb := io.ReadFull(b, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		for _, err := range []error{erra, errb} {
			if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
				return false, err
			}
		}
		if erra != nil || errb != nil {
			return erra != nil && errb != nil, nil
		}
	}
}

// isBinary says whether s is not text: a NUL byte in its first
// diffBinaryPeek bytes (git's rule), or not UTF-8.
func isBinary(s string) bool {
	return strings.IndexByte(s[:min(len(s), diffBinaryPeek)], 0) >= 0 || !utf8.ValidString(s)
}

// wireHunks is the JSON form of hs.
func wireHunks(hs []linediff.Hunk) []wire.DiffHunk {
	out := make([]wire.DiffHunk, len(hs))
	for i, h := range hs {
		wh := wire.DiffHunk{OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines,
			Lines: make([]wire.DiffLine, len(h.Lines))}
		for j, l := range h.Lines {
			text, nl := strings.CutSuffix(l.Text, "\n")
			op := wire.DiffContext
			switch l.Op {
			case linediff.Delete:
				op = wire.DiffDelete
			case linediff.Insert:
				op = wire.DiffInsert
			}
			wh.Lines[j] = wire.DiffLine{Op: op, Text: text, NoNewline: !nl}
		}
		out[i] = wh
	}
	return out
}

// gitMode is the mode of a file of kind k as git's extended headers write
// it (100644, 120000).
func gitMode(kind string, m *wire.FileMode) string {
	if kind == vault.KindSymlink.String() {
		return "120000"
	}
	return fmt.Sprintf("%06o", 0o100000|uint32(*m)&0o7777)
}

// diffName is the name of vault path p in a diff's headers, under prefix
// (a/ or b/): quoted as git quotes it when p has a control character, a
// double quote or a backslash.
func diffName(prefix, p string) string {
	name := prefix + strings.TrimPrefix(p, "/")
	quote := false
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
			quote = true
			break
		}
	}
	if !quote {
		return name
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// writeFileDiff writes f as git diff does: the diff --git line, the
// extended headers of a created or deleted file, of a mode change and of a
// version recorded under another path (a rename), then
// the --- and +++ lines and the hunks, or the line saying that a binary or
// too large file differs.
func writeFileDiff(w io.Writer, f fileDiff) error {
	a, b := diffName("a/", f.oldPath), diffName("b/", f.Path)
	var h strings.Builder
	fmt.Fprintf(&h, "diff --git %s %s\n", a, b)
	switch f.Status {
	case wire.DiffAdded:
		fmt.Fprintf(&h, "new file mode %s\n", gitMode(f.Kind, f.NewMode))
		a = "/dev/null"
	case wire.DiffDeleted:
		fmt.Fprintf(&h, "deleted file mode %s\n", gitMode(f.Kind, f.OldMode))
		b = "/dev/null"
	default:
		if *f.OldMode != *f.NewMode {
			fmt.Fprintf(&h, "old mode %s\nnew mode %s\n", gitMode(f.Kind, f.OldMode), gitMode(f.Kind, f.NewMode))
		}
		if f.oldPath != f.Path {
			fmt.Fprintf(&h, "rename from %s\nrename to %s\n", diffName("", f.oldPath), diffName("", f.Path))
		}
	}
	sizes := sizeChange(f.OldSize, f.NewSize)
	switch {
	case f.Binary:
		fmt.Fprintf(&h, "Binary files %s and %s differ (%s)\n", a, b, sizes)
	case f.TooLarge:
		fmt.Fprintf(&h, "Files %s and %s differ (%s; text larger than %s is not compared line by line)\n", a, b, sizes, humanSize(diffTextLimit))
	case len(f.hunks) > 0:
		fmt.Fprintf(&h, "--- %s\n+++ %s\n", a, b)
	}
	if _, err := io.WriteString(w, h.String()); err != nil {
		return err
	}
	return linediff.WriteHunks(w, f.hunks)
}

// sizeChange says "OLD -> NEW", or one size for a file on one side.
func sizeChange(before, after *int64) string {
	switch {
	case before == nil && after != nil:
		return humanSize(*after)
	case after == nil && before != nil:
		return humanSize(*before)
	case before != nil && after != nil:
		return humanSize(*before) + " -> " + humanSize(*after)
	}
	return ""
}

// writeDiffStat writes the summary of --stat, as git diff --stat does: a
// line per file with its count of changed lines and a bar of + and -, then
// the totals.
func writeDiffStat(w io.Writer, files []wire.DiffFile, st wire.DiffStat) error {
	const barMax = 50
	width, most := 0, 0
	for _, f := range files {
		width = max(width, utf8.RuneCountInString(f.Path))
		most = max(most, f.Insertions+f.Deletions)
	}
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, " %s%s | ", f.Path, strings.Repeat(" ", width-utf8.RuneCountInString(f.Path)))
		switch {
		case f.Binary || f.TooLarge:
			fmt.Fprintf(&b, "Bin %s\n", sizeChange(f.OldSize, f.NewSize))
			continue
		}
		n := f.Insertions + f.Deletions
		ins, del := f.Insertions, f.Deletions
		if most > barMax {
			ins, del = scaleBar(f.Insertions, most, barMax), scaleBar(f.Deletions, most, barMax)
		}
		line := fmt.Sprintf("%*d %s%s", len(strconv.Itoa(most)), n, strings.Repeat("+", ins), strings.Repeat("-", del))
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	fmt.Fprintf(&b, " %d %s changed", st.Files, plural(st.Files, "file", "files"))
	if st.Insertions > 0 || st.Deletions == 0 {
		fmt.Fprintf(&b, ", %d %s(+)", st.Insertions, plural(st.Insertions, "insertion", "insertions"))
	}
	if st.Deletions > 0 || st.Insertions == 0 {
		fmt.Fprintf(&b, ", %d %s(-)", st.Deletions, plural(st.Deletions, "deletion", "deletions"))
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// scaleBar scales n of most to a bar of at most width, at least 1 when n is not 0.
func scaleBar(n, most, width int) int {
	if n == 0 {
		return 0
	}
	return max(1, n*width/most)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
