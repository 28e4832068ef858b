package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/urfave/cli/v2"

	"avfs/mount"
	"avfs/vault"
	"avfs/wire"
)

// serveMinProcs is the least GOMAXPROCS of a process that serves a mount.
const serveMinProcs = 16

// serveProcs raises GOMAXPROCS in `avfs mount`, a process about to serve
// a FUSE mount for long, unless the GOMAXPROCS environment variable sets
// it. go-fuse reads /dev/fuse with blocking system calls, and each reader
// blocked there holds a P. With as many Ps as CPUs (two on small machines)
// no P is idle, so the runtime's monitor takes Ps back from blocked
// readers every 20 µs and wakes threads to run them, which costs a context
// switch each. Spare Ps stop that churn: on a two-CPU machine a mount
// served 20–30% fewer context switches and took 10–15% less time for
// 10,000 creates and their rm -rf. The extra Ps are idle; Go code still
// runs on at most as many threads as there is work. Raising it costs
// about 5 ms (new Ps, threads and go-fuse readers), which is why proxy
// exec, whose typical run is one short command, does not.
//
// It also sets Go's default GC target (100) back (streamingGC), unless GOGC
// or GOMEMLIMIT says otherwise: a mount server streams every byte written
// through it through the heap (go-fuse's request buffers, the open files'
// chunk buffers, the driver's copies), and at startupGCPercent (400) the
// heap grew to the memory limit before collecting. Measured on two CPUs
// writing 100 MiB of distinct data through the mount, three rounds each:
// peak RSS 236–254 MB at 400, 122–136 MB at 100, and no slower write.
// Every MB the server holds also costs at its exit (about 0.15 ms per MB
// here to give the pages back), which is on the unmount's critical path:
// the caller waits for the exit.
func serveProcs() {
	streamingGC()
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	if runtime.GOMAXPROCS(0) < serveMinProcs {
		runtime.GOMAXPROCS(serveMinProcs)
	}
}

// mountReady is the JSON document `avfs mount --json` prints once the
// directory is mounted.
type mountReady struct {
	Kind     string `json:"kind"` // "mount_ready"
	Vault    string `json:"vault"`
	Dir      string `json:"dir"`
	PID      int    `json:"pid"`
	ReadOnly bool   `json:"readonly"`
}

// unmountResult is the JSON document of `avfs unmount`.
type unmountResult struct {
	Dir  string `json:"dir"`
	Lazy bool   `json:"lazy"`
}

func mountCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "mount",
		Usage: "serve the vault as a directory over FUSE, in the foreground",
		UsageText: "avfs mount [--vault NAME] [--readonly] DIR\n\n" +
			"Serves until SIGINT/SIGTERM or `avfs unmount DIR`. DIR is mounted before the\n" +
			"ready line (or, with --json, the ready document) is printed.\n\n" +
			"example: avfs --vault work mount ~/work &",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "readonly", Usage: "refuse every change (several read-only mounts may share a vault with one writer)"},
			&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request on stderr"},
			&cli.BoolFlag{Name: "allow-other", Usage: "let other users' processes reach the mount, as its modes allow (a non-root user needs user_allow_other in /etc/fuse.conf)"},
			// proxy exec's private mount: what still uses it when it stops
			// is left over from the run (its avfs was killed) and is ended.
		},
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "DIR")
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(a[0])
			if err != nil {
				return wire.Errorf(wire.CodeInvalidInput, "mount: %v", err)
			}
			// A missing DIR is made (its parent must exist) and removed
			// again once unmounted; a DIR that was there is left as it was.
			if err := os.Mkdir(dir, 0o755); err == nil {
				defer os.Remove(dir)
			} else if !errors.Is(err, fs.ErrExist) {
				return wire.Errorf(wire.CodeInvalidInput, "mount: %v", err)
			}
			name := e.vaultName()
			serveProcs()
			return e.withNamed(c, name, func(v *vault.Vault) error {
				sess, err := mount.Mount(c.Context, v, dir, mount.Options{
					ReadOnly:   c.Bool("readonly"),
					FsName:     "avfs:" + name,
					Debug:      c.Bool("debug"),
					AllowOther: c.Bool("allow-other"),
				})
				if err != nil {
					return err
				}
				ready := mountReady{Kind: "mount_ready", Vault: name, Dir: dir, PID: os.Getpid(), ReadOnly: c.Bool("readonly")}
				// The ready document is one line, so a harness can read it with a line reader.
				var werr error
				if e.json {
					e.printed = true
					werr = json.NewEncoder(e.stdout).Encode(ready)
				} else {
					_, werr = fmt.Fprintf(e.stdout, "mounted vault %s at %s (pid %d); stop with Ctrl-C or `avfs unmount %s`\n", name, dir, ready.PID, dir)
				}
				if err := werr; err != nil {
					sess.Unmount(true)
					return err
				}
				select {
				case <-sess.Done():
					return nil // unmounted from outside
				case <-c.Context.Done():
				}
				// SIGINT/SIGTERM: unmount; if something still uses it, detach it.
				err = sess.Unmount(false)
				if err != nil {
					if lerr := sess.Unmount(true); lerr != nil {
						return lerr
					}
				}
				return nil
			})
		},
	}
}

func unmountCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "unmount",
		Usage: "unmount an avfs mount",
		UsageText: "avfs unmount [--lazy] DIR\n\n" +
			"A mount in use fails with mount_busy naming the processes that hold it;\n" +
			"--lazy detaches it now and lets it go when they finish. Anything but an avfs\n" +
			"mount (a plain directory, another file system) is refused with not_mounted;\n" +
			"a dead avfs mount (its server killed) is unmounted.\n\n" +
			"example: avfs unmount ~/work",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "lazy", Usage: "detach a busy mount (MNT_DETACH)"}},
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "DIR")
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(a[0])
			if err != nil {
				return wire.Errorf(wire.CodeInvalidInput, "unmount: %v", err)
			}
			// A mount whose server died is cleaned up as well.
			if err := mount.CleanStale(dir); err != nil {
				return err
			}
			if err := mount.Unmount(dir, c.Bool("lazy")); err != nil {
				return err
			}
			return e.emit(unmountResult{Dir: dir, Lazy: c.Bool("lazy")}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "unmounted %s\n", dir)
				return err
			})
		},
	}
}
