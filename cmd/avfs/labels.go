package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"avfs/vault"
	"avfs/wire"
)

// labelCommands are `avfs tag` and `avfs meta`: tags and KEY=VALUE
// metadata on vault entries (see vault/labels.go), usable in `avfs find`.
func labelCommands(e *env) []*cli.Command {
	return []*cli.Command{
		{
			Name:  "tag",
			Usage: "show, add or remove the tags of a vault entry",
			UsageText: "avfs tag PATH [TAG...]\navfs tag --remove PATH TAG...\n\n" +
				"Without TAG, prints the entry's tags; with them, adds (or with --remove, removes) them, in one change.\n" +
				"Tags are extended attributes (user.avfs.tag.NAME): kept in history and checkpoints; avfs find -tag selects by them.\n\n" +
				"example: avfs tag /src/main.go reviewed",
			Flags: []cli.Flag{&cli.BoolFlag{Name: "remove", Usage: "remove the tags given"}},
			Action: func(c *cli.Context) error {
				a, err := args(c, 1, -1, "PATH [TAG...]")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a[:1]); err != nil {
					return err
				}
				var edit vault.LabelEdit
				if c.Bool("remove") {
					if len(a) < 2 {
						return usageError("tag: --remove needs the tags to remove (usage: avfs tag --remove PATH TAG...)")
					}
					edit.RemoveTags = a[1:]
				} else {
					edit.AddTags = a[1:]
				}
				return e.label(c, a[0], edit, func(w io.Writer, l wire.Labels) error {
					for _, t := range l.Tags {
						if _, err := fmt.Fprintln(w, t); err != nil {
							return err
						}
					}
					return nil
				})
			},
		},
		{
			Name:  "meta",
			Usage: "show, set or remove KEY=VALUE metadata of a vault entry",
			UsageText: "avfs meta PATH [KEY=VALUE...]\navfs meta --remove PATH KEY...\n\n" +
				"Without KEY=VALUE, prints the entry's metadata; with them, sets (or with --remove, removes) keys, in one change.\n" +
				"Metadata are extended attributes (user.avfs.meta.KEY); avfs find -meta KEY[=VALUE] selects by them.\n\n" +
				"example: avfs meta /data/run.csv source=sensor-3 owner=ops",
			Flags: []cli.Flag{&cli.BoolFlag{Name: "remove", Usage: "remove the keys given"}},
			Action: func(c *cli.Context) error {
				a, err := args(c, 1, -1, "PATH [KEY=VALUE...]")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a[:1]); err != nil {
					return err
				}
				var edit vault.LabelEdit
				if c.Bool("remove") {
					if len(a) < 2 {
						return usageError("meta: --remove needs the keys to remove (usage: avfs meta --remove PATH KEY...)")
					}
					edit.RemoveMeta = a[1:]
				} else if len(a) > 1 {
					edit.SetMeta = map[string]string{}
					for _, kv := range a[1:] {
						k, val, ok := strings.Cut(kv, "=")
						if !ok {
							return usageError("meta: %q is not KEY=VALUE", kv)
						}
						edit.SetMeta[k] = val
					}
				}
				return e.label(c, a[0], edit, func(w io.Writer, l wire.Labels) error {
					keys := make([]string, 0, len(l.Meta))
					for k := range l.Meta {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					for _, k := range keys {
						if _, err := fmt.Fprintf(w, "%s=%s\n", k, l.Meta[k]); err != nil {
							return err
						}
					}
					return nil
				})
			},
		},
	}
}

// label applies edit to the entry at p (or only reads its labels, when
// edit changes nothing) and emits them.
func (e *env) label(c *cli.Context, p string, edit vault.LabelEdit, text func(io.Writer, wire.Labels) error) error {
	return e.withVault(c, func(v *vault.Vault) error {
		var l wire.Labels
		var err error
		if len(edit.AddTags)+len(edit.RemoveTags)+len(edit.SetMeta)+len(edit.RemoveMeta) == 0 {
			l, err = v.Labels(c.Context, p)
		} else {
			l, err = v.Label(c.Context, p, edit)
		}
		if err != nil {
			return err
		}
		return e.emit(l, func(w io.Writer) error { return text(w, l) })
	})
}
