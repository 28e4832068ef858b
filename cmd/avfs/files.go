package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"avfs/vault"
	"avfs/wire"
)

// listing is the JSON document of `avfs ls` and `avfs tree`.
type listing struct {
	Path    string        `json:"path"`               // as given
	PathB64 string        `json:"path_b64,omitempty"` // wire.B64 of Path
	Entries []vault.Entry `json:"entries"`
}

// removed is one path of `avfs rm`.
type removed struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"` // wire.B64 of Path
	Removed int64  `json:"removed"`            // entries removed (0 when missing with -f)
}

// transfer is the JSON document of `avfs import` and `avfs export`.
type transfer struct {
	Host    string `json:"host_path"`
	HostB64 string `json:"host_path_b64,omitempty"` // wire.B64 of Host
	Path    string `json:"vault_path"`
	PathB64 string `json:"vault_path_b64,omitempty"` // wire.B64 of Path
	vault.TransferResult
}

// copied is the JSON document of `avfs cp`.
type copied struct {
	Src    string `json:"src"`
	SrcB64 string `json:"src_b64,omitempty"` // wire.B64 of Src
	Dst    string `json:"dst"`
	DstB64 string `json:"dst_b64,omitempty"` // wire.B64 of Dst
	Copied int64  `json:"copied"`
}

func filesCommands(e *env) []*cli.Command {
	return []*cli.Command{
		{
			Name:                   "ls",
			Usage:                  "list a directory of the vault",
			UsageText:              "avfs ls [-l] [-a] [-h] [PATH]\n\nexample: avfs ls -la /src",
			UseShortOptionHandling: true,
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "long", Aliases: []string{"l"}, Usage: "show mode, size and modification time"},
				&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "include names that begin with a dot"},
				// -h too, as in ls (lsHumanFlag rewrites it: urfave/cli takes -h for help)
				&cli.BoolFlag{Name: "human-readable", Usage: "with -l, sizes as 1.5 KiB (also -h)"},
			},
			Action: func(c *cli.Context) error {
				a, err := args(c, 0, 1, "[PATH]")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				p := "/"
				if len(a) == 1 {
					p = a[0]
				}
				return e.withVault(c, func(v *vault.Vault) error {
					ents, err := v.List(c.Context, p)
					if err != nil {
						return err
					}
					if !c.Bool("all") {
						ents = withoutDotNames(ents)
					}
					return e.emit(listing{Path: p, PathB64: wire.B64(p), Entries: ents}, func(w io.Writer) error {
						if !c.Bool("long") {
							for _, en := range ents {
								if _, err := fmt.Fprintln(w, en.Name); err != nil {
									return err
								}
							}
							return nil
						}
						rows := make([]string, len(ents))
						for i, en := range ents {
							rows[i] = longLine(en, c.Bool("human-readable"))
						}
						return table(w, "", rows)
					})
				})
			},
		},
		{
			Name:      "tree",
			Usage:     "show a directory tree of the vault",
			UsageText: "avfs tree [-L N] [PATH]\n\nexample: avfs tree -L 2 /src",
			Flags:     []cli.Flag{&cli.IntFlag{Name: "level", Aliases: []string{"L"}, Usage: "descend at most `N` levels below PATH (0: no limit)"}},
			Action: func(c *cli.Context) error {
				level := c.Int("level")
				if level < 0 {
					return usageError("tree: -L needs a level of 0 or more")
				}
				a, err := args(c, 0, 1, "[PATH]")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				p := "/"
				if len(a) == 1 {
					p = a[0]
				}
				return e.withVault(c, func(v *vault.Vault) error {
					ents := []vault.Entry{}
					root := ""
					depth := func(q string) int {
						rel := strings.TrimPrefix(strings.TrimPrefix(q, root), "/")
						if rel == "" {
							return 0
						}
						return strings.Count(rel, "/") + 1
					}
					if err := v.Walk(c.Context, p, func(en vault.Entry) error {
						if len(ents) == 0 {
							root = en.Path
						}
						if level == 0 || depth(en.Path) <= level {
							ents = append(ents, en)
						}
						return nil
					}); err != nil {
						return err
					}
					return e.emit(listing{Path: p, PathB64: wire.B64(p), Entries: ents}, func(w io.Writer) error {
						if len(ents) == 0 {
							return nil
						}
						for i, en := range ents {
							name := en.Name
							if i == 0 {
								name = en.Path
							}
							switch {
							case en.Kind == vault.KindDir && i > 0:
								name += "/"
							case en.Kind == vault.KindFifo:
								name += "|" // as ls -F marks them
							case en.Kind == vault.KindSocket:
								name += "="
							}
							if en.Kind == vault.KindSymlink {
								name += " -> " + en.Target
							}
							if _, err := fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", depth(en.Path)), name); err != nil {
								return err
							}
						}
						return nil
					})
				})
			},
		},
		{
			Name:      "cat",
			Usage:     "print a file of the vault (raw bytes), or one of its versions",
			UsageText: "avfs cat PATH [--version N]\n\nexample: avfs cat /notes.txt --version 2",
			Description: "The content is streamed: avfs holds a few MiB of it at a time, whatever the file's size, and reads\n" +
				"it from one snapshot of the vault (writes made meanwhile are not seen). With --json it prints one\n" +
				"document {path, version, size, content_base64}, the content encoded as it is read.\n\n" +
				"When the file cannot be read at all (not_found, is_a_directory, version_not_found) no content is\n" +
				"printed (with --json, the error document is). When reading fails after output began (a damaged vault: integrity_failed), avfs exits\n" +
				"non-zero with the error on stderr, and stdout holds a prefix of the content (with --json, an\n" +
				"unfinished document).",
			Flags: []cli.Flag{&cli.Int64Flag{Name: "version", Usage: "print version `N` from the file's history (see avfs log)"}},
			Action: func(c *cli.Context) error {
				a, err := args(c, 1, 1, "PATH")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				p := a[0]
				return e.withVault(c, func(v *vault.Vault) error {
					var r *vault.FileReader
					if c.IsSet("version") {
						r, err = v.OpenVersion(c.Context, p, c.Int64("version"))
					} else {
						r, err = v.OpenFile(c.Context, p)
					}
					if err != nil {
						return err
					}
					defer r.Close()
					if r.Size() > 1<<20 {
						streamingGC()
					}
					if !e.json {
						_, err := r.WriteTo(e.stdout)
						return err
					}
					doc := wire.CatResult{Path: p, PathB64: wire.B64(p), Version: c.Int64("version"), Size: r.Size()}
					e.printed = true // the document has begun: a later error goes to stderr
					return writeJSONBase64(e.stdout, doc, "content_base64", func(w io.Writer) error {
						_, err := r.WriteTo(w)
						return err
					})
				})
			},
		},
		{
			Name:      "write",
			Usage:     "write stdin to a file of the vault (replacing or appending)",
			UsageText: "avfs write PATH [--mode 0644] [--append] [-p]\n\nexample: echo hello | avfs write /notes.txt -p",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "mode", Usage: "permission bits of a new file, in octal (default 0644)"},
				&cli.BoolFlag{Name: "append", Aliases: []string{"a"}, Usage: "append instead of replacing"},
				&cli.BoolFlag{Name: "parents", Aliases: []string{"p"}, Usage: "create missing parent directories"},
			},
			Action: func(c *cli.Context) error {
				a, err := args(c, 1, 1, "PATH")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				opts := vault.WriteOptions{Append: c.Bool("append"), Parents: c.Bool("parents")}
				if s := c.String("mode"); s != "" {
					if opts.Mode, err = parseMode(s); err != nil {
						return err
					}
				}
				return e.withVault(c, func(v *vault.Vault) error {
					en, err := v.WriteFile(c.Context, a[0], e.stdin, opts)
					if err != nil {
						return err
					}
					return e.emit(en, nil)
				})
			},
		},
		{
			Name:      "mkdir",
			Usage:     "make directories in the vault",
			UsageText: "avfs mkdir [-p] [--mode 0755] PATH...\n\nexample: avfs mkdir -p /src/pkg /docs",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "parents", Aliases: []string{"p"}, Usage: "make missing parents; no error when it exists"},
				&cli.StringFlag{Name: "mode", Usage: "permission bits in octal (default 0755)"},
			},
			Action: func(c *cli.Context) error {
				a, err := args(c, 1, -1, "PATH...")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				var mode uint32
				if s := c.String("mode"); s != "" {
					if mode, err = parseMode(s); err != nil {
						return err
					}
				}
				return e.withVault(c, func(v *vault.Vault) error {
					out := []vault.Entry{}
					for _, p := range a {
						en, err := v.Mkdir(c.Context, p, mode, c.Bool("parents"))
						if err != nil {
							return err
						}
						out = append(out, en)
					}
					return e.emit(map[string]any{"entries": out}, nil)
				})
			},
		},
		{
			Name:                   "rm",
			Usage:                  "remove files or directories from the vault",
			UsageText:              "avfs rm [-r] [-f] PATH...\n\nexample: avfs rm -rf /build",
			UseShortOptionHandling: true,
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "recursive", Aliases: []string{"r", "R"}, Usage: "remove directories and their contents"},
				&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "no error when a path is missing"},
			},
			Action: func(c *cli.Context) error {
				a, err := args(c, 1, -1, "PATH...")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				return e.withVault(c, func(v *vault.Vault) error {
					out := []removed{}
					for _, p := range a {
						n, err := v.Remove(c.Context, p, c.Bool("recursive"))
						if err != nil && !(c.Bool("force") && wire.HasCode(err, wire.CodeNotFound)) {
							return err
						}
						out = append(out, removed{Path: p, PathB64: wire.B64(p), Removed: n})
					}
					return e.emit(map[string]any{"removed": out}, nil)
				})
			},
		},
		{
			Name:      "cp",
			Usage:     "copy a file or tree inside the vault (into DST when it is a directory)",
			UsageText: "avfs cp [-r] SRC DST\n\nexample: avfs cp -r /src /backup",
			Flags:     []cli.Flag{&cli.BoolFlag{Name: "recursive", Aliases: []string{"r", "R"}, Usage: "copy directories"}},
			Action: func(c *cli.Context) error {
				a, err := args(c, 2, 2, "SRC DST")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				return e.withVault(c, func(v *vault.Vault) error {
					n, err := v.Copy(c.Context, a[0], a[1], c.Bool("recursive"))
					if err != nil {
						return err
					}
					return e.emit(copied{Src: a[0], SrcB64: wire.B64(a[0]), Dst: a[1], DstB64: wire.B64(a[1]), Copied: n}, nil)
				})
			},
		},
		{
			Name:      "mv",
			Usage:     "move or rename inside the vault (into DST when it is a directory)",
			UsageText: "avfs mv SRC DST\n\nexample: avfs mv /draft.txt /final.txt",
			Action: func(c *cli.Context) error {
				a, err := args(c, 2, 2, "SRC DST")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				return e.withVault(c, func(v *vault.Vault) error {
					en, err := v.Move(c.Context, a[0], a[1])
					if err != nil {
						return err
					}
					return e.emit(en, nil)
				})
			},
		},
		{
			Name:      "ln",
			Usage:     "make a symbolic link in the vault",
			UsageText: "avfs ln -s TARGET PATH\n\nexample: avfs ln -s ../lib/util.go /src/util.go",
			Flags:     []cli.Flag{&cli.BoolFlag{Name: "symbolic", Aliases: []string{"s"}, Usage: "make a symbolic link (required: hard links are not supported)"}},
			Action: func(c *cli.Context) error {
				a, err := args(c, 2, 2, "-s TARGET PATH")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				if !c.Bool("symbolic") {
					return usageError("ln: only symbolic links are supported; use ln -s TARGET PATH")
				}
				return e.withVault(c, func(v *vault.Vault) error {
					en, err := v.Symlink(c.Context, a[0], a[1])
					if err != nil {
						return err
					}
					return e.emit(en, nil)
				})
			},
		},
		{
			Name:      "chmod",
			Usage:     "change the permission bits of a vault entry",
			UsageText: "avfs chmod MODE PATH\n\nexample: avfs chmod 0755 /run.sh",
			Action: func(c *cli.Context) error {
				a, err := args(c, 2, 2, "MODE PATH")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a[1:]); err != nil {
					return err
				}
				mode, err := parseMode(a[0])
				if err != nil {
					return err
				}
				return e.withVault(c, func(v *vault.Vault) error {
					en, err := v.Chmod(c.Context, a[1], mode)
					if err != nil {
						return err
					}
					return e.emit(en, nil)
				})
			},
		},
		{
			Name:      "stat",
			Usage:     "show the attributes of a vault entry (symlinks are not followed)",
			UsageText: "avfs stat PATH\n\nexample: avfs stat /notes.txt --json",
			Action: func(c *cli.Context) error {
				a, err := args(c, 1, 1, "PATH")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				return e.withVault(c, func(v *vault.Vault) error {
					en, err := v.Stat(c.Context, a[0])
					if err != nil {
						return err
					}
					return e.emit(en, func(w io.Writer) error {
						target := ""
						if en.Kind == vault.KindSymlink {
							target = " -> " + en.Target
						}
						_, err := fmt.Fprintf(w, "path:  %s%s\nkind:  %s\nmode:  %s (%04o)\nsize:  %d\nowner: %d:%d\nlinks: %d\ninode: %d\nmtime: %s\nctime: %s\n",
							en.Path, target, en.Kind, modeString(en.Kind, uint32(en.Mode)), en.Mode, en.Size, en.UID, en.GID, en.Nlink, en.Ino,
							en.Mtime.Local().Format(timeFmt), en.Ctime.Local().Format(timeFmt))
						return err
					})
				})
			},
		},
		{
			Name:      "import",
			Usage:     "copy a host file or tree into the vault (modes, symlinks and mtimes kept)",
			UsageText: "avfs import HOST_PATH VAULT_PATH\n\nexample: avfs import ./project /project",
			Action: func(c *cli.Context) error {
				a, err := args(c, 2, 2, "HOST_PATH VAULT_PATH")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a[1:]); err != nil {
					return err
				}
				return e.withVault(c, func(v *vault.Vault) error {
					p := e.progress("import", "files")
					defer p.finish()
					res, err := v.ImportWith(c.Context, a[0], a[1], vault.ImportOptions{Progress: p.report()})
					p.finish()
					if err != nil {
						return err
					}
					return e.emit(transfer{Host: a[0], HostB64: wire.B64(a[0]), Path: a[1], PathB64: wire.B64(a[1]), TransferResult: res}, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "imported %d files, %d directories, %d symlinks%s (%s)\n", res.Files, res.Dirs, res.Symlinks, specialCount(res), humanSize(res.Bytes))
						return err
					})
				})
			},
		},
		{
			Name:  "export",
			Usage: "copy a vault file or tree to the host (refuses to overwrite unless --force)",
			UsageText: "avfs export VAULT_PATH HOST_PATH [--force] [--preserve-setid]\n\n" +
				"HOST_PATH is followed as given; nothing beneath it is: a symlink or other host\n" +
				"entry in the way of what the vault has is replaced (--force) or refused, never\n" +
				"written through. Setuid/setgid bits of files are dropped unless --preserve-setid.\n\n" +
				"example: avfs export /project ./out --force",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "replace existing host files (and symlinks, never followed) and merge directories"},
				&cli.BoolFlag{Name: "preserve-setid", Usage: "keep the setuid and setgid bits of files (dropped by default)"},
			},
			Action: func(c *cli.Context) error {
				a, err := args(c, 2, 2, "VAULT_PATH HOST_PATH")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a[:1]); err != nil {
					return err
				}
				return e.withVault(c, func(v *vault.Vault) error {
					p := e.progress("export", "files")
					defer p.finish()
					res, err := v.ExportWith(c.Context, a[0], a[1], vault.ExportOptions{Force: c.Bool("force"), PreserveSetid: c.Bool("preserve-setid"), Progress: p.report()})
					p.finish()
					if err != nil {
						return err
					}
					return e.emit(transfer{Host: a[1], HostB64: wire.B64(a[1]), Path: a[0], PathB64: wire.B64(a[0]), TransferResult: res}, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "exported %d files, %d directories, %d symlinks%s (%s)\n", res.Files, res.Dirs, res.Symlinks, specialCount(res), humanSize(res.Bytes))
						return err
					})
				})
			},
		},
	}
}

// longLine is one line of ls -l: mode, size, mtime, name [-> target].
func longLine(en vault.Entry, human bool) string {
	name := en.Name
	if en.Kind == vault.KindSymlink {
		name += " -> " + en.Target
	}
	size := fmt.Sprint(en.Size)
	if human {
		size = humanSize(en.Size)
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s", modeString(en.Kind, uint32(en.Mode)), size, en.Mtime.Local().Format(timeFmt), name)
}

// withoutDotNames drops the entries whose names begin with a dot, as ls
// does without -a.
func withoutDotNames(ents []vault.Entry) []vault.Entry {
	kept := ents[:0:0]
	for _, en := range ents {
		if !strings.HasPrefix(en.Name, ".") {
			kept = append(kept, en)
		}
	}
	return kept
}

// specialCount is ", N special files" for a transfer that moved named
// pipes, socket or device nodes, else "", and says how many device nodes
// an export skipped (an unprivileged user cannot make them).
func specialCount(res vault.TransferResult) string {
	s := ""
	if res.Special != 0 {
		s = fmt.Sprintf(", %d special files", res.Special)
	}
	if res.SkippedDevices != 0 {
		s += fmt.Sprintf(", %d device nodes skipped (making them needs root)", res.SkippedDevices)
	}
	return s
}
