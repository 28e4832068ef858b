package main

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"avfs/mount"
)

func init() {
	register("30-mount", mountBench)
	// The bench binary serves go-fuse's loopback file system when asked, so
	// that workloads never run inside the process that serves their mount.
	if len(os.Args) == 4 && (os.Args[1] == "-serve-loopback" || os.Args[1] == "-serve-loopback-nopass") {
		serveLoopback(os.Args[2], os.Args[3], os.Args[1] == "-serve-loopback-nopass")
	}
}

// serveLoopback serves orig at mnt until SIGTERM: go-fuse's loopback, or
// with nopass the same without FUSE passthrough (newNoPassRoot).
func serveLoopback(orig, mnt string, nopass bool) {
	newRoot := fs.NewLoopbackRoot
	if nopass {
		newRoot = newNoPassRoot
	}
	root, err := newRoot(orig)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	sec := time.Second
	server, err := fs.Mount(mnt, root, &fs.Options{
		MountOptions: fuse.MountOptions{DirectMount: true, FsName: "loopback", Options: []string{"default_permissions"}, MaxWrite: 1 << 20, MaxReadAhead: 1 << 20},
		EntryTimeout: &sec, AttrTimeout: &sec,
	})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	server.Unmount()
	os.Exit(0)
}

// target is one place the workloads run in.
type target struct {
	name  string
	dir   string
	start func() error // (re)mounts; nil for a plain directory
	stop  func() error
}

// mountRounds is how many times the mount workloads run on each target.
const mountRounds = 3

func mountBench(ctx context.Context, cfg config) ([]section, error) {
	work := filepath.Join(cfg.Work, "mount")
	plain := filepath.Join(work, "plain")
	loopOrig, loopMnt := filepath.Join(work, "loop-orig"), filepath.Join(work, "loop-mnt")
	npOrig, npMnt := filepath.Join(work, "nopass-orig"), filepath.Join(work, "nopass-mnt")
	avfsMnt, home := filepath.Join(work, "avfs-mnt"), filepath.Join(work, "avfs-home")
	for _, d := range []string{plain, loopOrig, loopMnt, npOrig, npMnt, avfsMnt, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	self, _ := os.Executable()
	var loopCmd, npCmd, avfsCmd *exec.Cmd
	startChild := func(c **exec.Cmd, name string, args []string, env []string) func() error {
		return func() error {
			cmd := exec.Command(name, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Stderr = os.Stderr
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				return err
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if line != "ready\n" && !json.Valid([]byte(line)) {
				cmd.Process.Kill()
				cmd.Wait()
				return fmt.Errorf("%s: %q", name, line)
			}
			*c = cmd
			return nil
		}
	}
	stopChild := func(c **exec.Cmd) func() error {
		return func() error {
			if *c == nil {
				return nil
			}
			(*c).Process.Signal(syscall.SIGTERM)
			err := (*c).Wait()
			*c = nil
			return err
		}
	}
	targets := []target{
		{name: "plain directory", dir: plain},
		{name: "go-fuse loopback", dir: loopMnt,
			start: startChild(&loopCmd, self, []string{"-serve-loopback", loopOrig, loopMnt}, nil), stop: stopChild(&loopCmd)},
		{name: "avfs mount", dir: avfsMnt,
			start: startChild(&avfsCmd, cfg.Bin, []string{"--json", "mount", avfsMnt}, []string{"AVFS_HOME=" + home}), stop: stopChild(&avfsCmd)},
		{name: "loopback without passthrough", dir: npMnt,
			start: startChild(&npCmd, self, []string{"-serve-loopback-nopass", npOrig, npMnt}, nil), stop: stopChild(&npCmd)},
	}
	type workload struct {
		name string
		run  func(t target) (time.Duration, error)
	}
	const small = 10000
	archive := filepath.Join(work, "files.tar")
	if err := makeArchive(archive, archiveFiles, archiveDirs); err != nil {
		return nil, err
	}
	workloads := []workload{
		{"100 MB sequential write", func(t target) (time.Duration, error) { return seqWrite(filepath.Join(t.dir, "big"), 100<<20) }},
		{"100 MB sequential read, cold", func(t target) (time.Duration, error) {
			if err := remount(t); err != nil {
				return 0, err
			}
			return seqRead(filepath.Join(t.dir, "big"))
		}},
		{"100 MB sequential read, warm", func(t target) (time.Duration, error) { return seqRead(filepath.Join(t.dir, "big")) }},
		{"10,000 small file creates", func(t target) (time.Duration, error) { return manyFiles(t.dir, small, "create") }},
		{"10,000 stats (cold)", func(t target) (time.Duration, error) {
			if err := remount(t); err != nil {
				return 0, err
			}
			return manyFiles(t.dir, small, "stat")
		}},
		{"10,000 small file reads", func(t target) (time.Duration, error) { return manyFiles(t.dir, small, "read") }},
		{"readdir of 10,000 entries", func(t target) (time.Duration, error) { return manyFiles(t.dir, small, "readdir") }},
		{"rm -rf of 10,000 files", func(t target) (time.Duration, error) { return shell(t.dir, "rm -rf small") }},
		{"git init, add and commit 2,000 files", func(t target) (time.Duration, error) {
			return shell(t.dir, `mkdir repo && cd repo && git init -q . && git config user.email b@example.com && git config user.name B &&
				for i in $(seq 1 2000); do echo "file $i" > f$i.txt; done && git add . && git commit -qm all`)
		}},
		{"git status (2,000 files)", func(t target) (time.Duration, error) {
			return shell(filepath.Join(t.dir, "repo"), "git status --porcelain >/dev/null")
		}},
		{"tar xf of a 20,000-file archive", func(t target) (time.Duration, error) {
			return shell(t.dir, "mkdir untar && tar -xf "+archive+" -C untar")
		}},
	}
	// Rounds: every workload runs on every target once per round, in a
	// directory of its own, and the targets take turns going first, so
	// that a slow spell of a shared machine does not land on one target
	// only. Each cell is the median of the rounds.
	results := make([][][]time.Duration, len(workloads)) // [workload][target][round]
	for wi := range results {
		results[wi] = make([][]time.Duration, len(targets))
	}
	var floors, coldFloors []time.Duration // the SQLite floors of the 100 MB write and its cold read, once per round
	var servers []serverRound              // a big write's peak RSS and the unmounts, once per round
	var npUnmounts []time.Duration         // the unmount after a big write of the loopback without passthrough
	for round := 0; round < mountRounds; round++ {
		fl, err := sqliteFloors(ctx, filepath.Join(work, "floor"), 100<<20)
		if err != nil {
			return nil, err
		}
		floors, coldFloors = append(floors, fl.Write), append(coldFloors, fl.Cold)
		order := []int{0, 1, 2, 3}
		if round%2 == 1 {
			order = []int{3, 2, 1, 0}
		}
		for _, ti := range order {
			base := targets[ti]
			if base.start != nil {
				if err := base.start(); err != nil {
					return nil, fmt.Errorf("%s: %w", base.name, err)
				}
			}
			t := base
			t.dir = filepath.Join(base.dir, fmt.Sprintf("round%d", round))
			if err := os.Mkdir(t.dir, 0o755); err != nil {
				return nil, err
			}
			for wi, w := range workloads {
				d, err := w.run(t)
				if err != nil {
					if base.stop != nil {
						base.stop()
					}
					return nil, fmt.Errorf("%s on %s: %w", w.name, base.name, err)
				}
				results[wi][ti] = append(results[wi][ti], d)
			}
			if err := os.RemoveAll(t.dir); err != nil {
				return nil, fmt.Errorf("clean up %s: %w", base.name, err)
			}
			if base.stop != nil {
				if err := base.stop(); err != nil {
					return nil, fmt.Errorf("stop %s: %w", base.name, err)
				}
			}
			if ti == 2 {
				sr, err := measureServer(cfg.Bin, filepath.Join(work, fmt.Sprintf("server%d", round)), bigWrite)
				if err != nil {
					return nil, fmt.Errorf("avfs mount server: %w", err)
				}
				servers = append(servers, sr)
			}
			if ti == 3 {
				d, err := measureLoopbackUnmount(self, filepath.Join(work, fmt.Sprintf("nopass%d", round)), bigWrite)
				if err != nil {
					return nil, fmt.Errorf("loopback without passthrough: %w", err)
				}
				npUnmounts = append(npUnmounts, d)
			}
		}
	}
	var rows [][]string
	for wi, w := range workloads {
		var r [4]time.Duration
		var ratios []float64
		for ti := range targets {
			ds := append([]time.Duration(nil), results[wi][ti]...)
			sortDur(ds)
			r[ti] = median(ds)
		}
		for k := range results[wi][2] {
			ratios = append(ratios, float64(results[wi][2][k])/float64(results[wi][1][k]))
		}
		sort.Float64s(ratios)
		ratio := float64(r[2]) / float64(r[1])
		rows = append(rows, []string{w.name, fmtDur(r[0]), fmtDur(r[1]), fmtDur(r[3]), fmtDur(r[2]), fmt.Sprintf("%.2f×", ratio),
			fmt.Sprintf("%.2f–%.2f×", ratios[0], ratios[len(ratios)-1]), fmt.Sprintf("%.2f×", float64(r[2])/float64(r[3]))})
		switch wi {
		case 0:
			sortDur(floors)
			floor := median(floors)
			rows = append(rows, []string{"SQLite floor of that write (100 MB as 64 KiB blobs, one WAL transaction)", "—", "—", "—", fmtDur(floor),
				fmt.Sprintf("avfs write / floor: %.2f×", float64(r[2])/float64(floor)), "target ≤ 1.5×", "—"})
		case 1:
			sortDur(coldFloors)
			floor := median(coldFloors)
			rows = append(rows, []string{"SQLite floor of that read (the same blobs read back in one query and verified, caches dropped)", "—", "—", "—", fmtDur(floor),
				fmt.Sprintf("avfs cold read / floor: %.2f×", float64(r[2])/float64(floor)), "target ≤ 2× loopback", "—"})
		}
	}
	rows = append(rows, serverRows(servers, npUnmounts)...)
	return []section{{
		Title:  fmt.Sprintf("Mount: plain directory, go-fuse loopback and avfs, median of %d rounds", mountRounds),
		Header: []string{"workload", "plain dir", "loopback (FUSE floor)", "loopback without passthrough", "avfs mount", "avfs / loopback", "per round", "avfs / loopback without passthrough"},
		Rows:   rows,
		Notes: []string{
			fmt.Sprintf("Each round runs every workload on the four targets, one target after the other, the order reversed every other round; a cell is the median of %d rounds, and \"per round\" is the range of the round's avfs / loopback ratios.", mountRounds),
			"Targets: avfs within 1.5× of the loopback mount on metadata-heavy work and the git workload; warm re-reads at page-cache speed; cold sequential read at least 200 MB/s.",
			"Cold reads and cold stats remount the FUSE targets and drop the kernel caches first (plain directory: caches dropped).",
			"The loopback file system gets FUSE passthrough on this kernel for bulk data; a SQLite-backed file system has no backing file descriptor to pass through.",
			fmt.Sprintf("The archive holds %d files of 100 B to 8 KiB of random content in %d directories, made once per bench run; target: avfs within 3× of the loopback.", archiveFiles, archiveDirs),
			"The loopback without passthrough is the same go-fuse loopback with its files' descriptors hidden from the kernel (and the page cache kept across opens, as avfs keeps it): the floor of a FUSE file system whose server answers reads and writes itself, as avfs's must from SQLite.",
			"The server rows use a fresh vault per round: peak RSS is the VmHWM (/proc/PID/status) of a fresh `avfs mount` after 1 GiB of distinct data was written through it and closed; an unmount is the time from SIGTERM to the server's exit (the caller's wait returning), right after that close, and for an idle mount, of a new server of the same vault that served nothing.",
		},
	}}, nil
}

// remount drops kernel caches, and remounts a FUSE target so nothing is cached.
func remount(t target) error {
	if t.stop != nil {
		if err := t.stop(); err != nil {
			return err
		}
	}
	_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
	if t.start != nil {
		return t.start()
	}
	return nil
}

// seqWrite writes n bytes of distinct data (one buffer repeated would be
// flattered by the vault's deduplication) to a new file p, 1 MiB per
// write, and closes it.
func seqWrite(p string, n int) (time.Duration, error) {
	data := make([]byte, n)
	rand.Read(data)
	start := time.Now()
	f, err := os.Create(p)
	if err != nil {
		return 0, err
	}
	for w := 0; w < n; w += 1 << 20 {
		if _, err := f.Write(data[w:min(w+1<<20, n)]); err != nil {
			f.Close()
			return 0, err
		}
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func seqRead(p string) (time.Duration, error) {
	start := time.Now()
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := io.Copy(io.Discard, f); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func manyFiles(dir string, n int, op string) (time.Duration, error) {
	base := filepath.Join(dir, "small")
	start := time.Now()
	switch op {
	case "create":
		if err := os.Mkdir(base, 0o755); err != nil {
			return 0, err
		}
		data := make([]byte, 100)
		for i := 0; i < n; i++ {
			if err := os.WriteFile(filepath.Join(base, fmt.Sprintf("f%05d", i)), data, 0o644); err != nil {
				return 0, err
			}
		}
	case "stat":
		for i := 0; i < n; i++ {
			if _, err := os.Lstat(filepath.Join(base, fmt.Sprintf("f%05d", i))); err != nil {
				return 0, err
			}
		}
	case "read":
		for i := 0; i < n; i++ {
			if _, err := os.ReadFile(filepath.Join(base, fmt.Sprintf("f%05d", i))); err != nil {
				return 0, err
			}
		}
	case "readdir":
		ents, err := os.ReadDir(base)
		if err != nil {
			return 0, err
		}
		if len(ents) != n {
			return 0, fmt.Errorf("readdir found %d entries", len(ents))
		}
	}
	return time.Since(start), nil
}

func shell(dir, script string) (time.Duration, error) {
	start := time.Now()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	return time.Since(start), nil
}

// The tar workload's archive: archiveFiles files in archiveDirs directories.
const (
	archiveFiles = 20000
	archiveDirs  = 200
)

// makeArchive writes a tar archive to p of files regular files of 100 B
// to 8 KiB of random content (distinct: deduplication would flatter a
// repeated buffer), spread over dirs directories.
func makeArchive(p string, files, dirs int) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(w)
	src := mrand.NewChaCha8(seed())
	pick := mrand.New(src)
	buf := make([]byte, 8<<10)
	now := time.Now()
	for d := 0; d < dirs; d++ {
		dir := fmt.Sprintf("d%03d/", d)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: now}); err != nil {
			f.Close()
			return err
		}
		for i := d; i < files; i += dirs {
			data := buf[:100+pick.IntN(len(buf)-100+1)]
			src.Read(data)
			h := &tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("%sf%05d", dir, i), Mode: 0o644, Size: int64(len(data)), ModTime: now}
			if err := tw.WriteHeader(h); err != nil {
				f.Close()
				return err
			}
			if _, err := tw.Write(data); err != nil {
				f.Close()
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// seed is a fresh seed for a ChaCha8 stream.
func seed() [32]byte {
	var s [32]byte
	rand.Read(s[:])
	return s
}

// bigWrite is what the server rows write through a fresh mount.
const bigWrite = 1 << 30

// serverRound is what measureServer saw of the avfs mount server in one
// round.
type serverRound struct {
	peakRSS   int64         // bytes: VmHWM after the big write
	unmount   time.Duration // SIGTERM to exit after the big write
	idleUnmnt time.Duration // SIGTERM to exit of a server that served nothing
}

// measureServer starts `avfs mount` on a fresh vault under work, writes n
// bytes of distinct data to one file and closes it, reads the server's
// peak RSS, and times its exit after SIGTERM; then times the exit of a
// new server of the same vault that served nothing (the vault has been
// mounted before, so its first retention pass is behind it, as for most
// mounts). work is removed afterwards.
func measureServer(bin, work string, n int64) (serverRound, error) {
	var r serverRound
	defer os.RemoveAll(work)
	home, mnt := filepath.Join(work, "home"), filepath.Join(work, "mnt")
	for _, d := range []string{home, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return r, err
		}
	}
	for _, idle := range []bool{false, true} {
		cmd, err := startServer(bin, mnt, home)
		if err != nil {
			return r, err
		}
		if !idle {
			if err := writeDistinct(filepath.Join(mnt, "big"), n); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				return r, err
			}
			if r.peakRSS, err = peakRSS(cmd.Process.Pid); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				return r, err
			}
		}
		start := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			return r, fmt.Errorf("avfs mount after SIGTERM: %w", err)
		}
		d := time.Since(start)
		if idle {
			r.idleUnmnt = d
		} else {
			r.unmount = d
		}
		if mount.IsMounted(mnt) {
			return r, fmt.Errorf("%s is still mounted after the server exited", mnt)
		}
	}
	return r, nil
}

// measureLoopbackUnmount is measureServer's big-write unmount for the
// loopback without passthrough (self -serve-loopback-nopass): the time
// from SIGTERM to the server's exit after n bytes of distinct data were
// written through it and closed — what the kernel itself spends
// dropping a FUSE mount's cached pages, with nothing to commit.
func measureLoopbackUnmount(self, work string, n int64) (time.Duration, error) {
	defer os.RemoveAll(work)
	orig, mnt := filepath.Join(work, "orig"), filepath.Join(work, "mnt")
	for _, d := range []string{orig, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	cmd := exec.Command(self, "-serve-loopback-nopass", orig, mnt)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, fmt.Errorf("loopback: %q", line)
	}
	if err := writeDistinct(filepath.Join(mnt, "big"), n); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, err
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("loopback after SIGTERM: %w", err)
	}
	d := time.Since(start)
	if mount.IsMounted(mnt) {
		return 0, fmt.Errorf("%s is still mounted after the server exited", mnt)
	}
	return d, nil
}

// startServer starts `avfs mount mnt` on AVFS_HOME home and waits for its
// ready document.
func startServer(bin, mnt, home string) (*exec.Cmd, error) {
	cmd := exec.Command(bin, "--json", "mount", mnt)
	cmd.Env = append(os.Environ(), "AVFS_HOME="+home)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !json.Valid([]byte(line)) {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("avfs mount: %q", line)
	}
	return cmd, nil
}

// writeDistinct writes n bytes of distinct random data to a new file p,
// 1 MiB per write, and closes it. It makes the data as it goes, so the
// bench itself holds 1 MiB of it, never n.
func writeDistinct(p string, n int64) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	src := mrand.NewChaCha8(seed())
	buf := make([]byte, 1<<20)
	for w := int64(0); w < n; w += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), n-w)]
		src.Read(b)
		if _, err := f.Write(b); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// peakRSS is the peak resident set (VmHWM) of process pid, in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// serverRows are the table's rows of the avfs server measurements: the
// median of the rounds, and their range.
func serverRows(rs []serverRound, npUnmounts []time.Duration) [][]string {
	if len(rs) == 0 || len(npUnmounts) == 0 {
		return nil
	}
	sortDur(npUnmounts)
	var rss []int64
	var big, idle []time.Duration
	for _, r := range rs {
		rss = append(rss, r.peakRSS)
		big = append(big, r.unmount)
		idle = append(idle, r.idleUnmnt)
	}
	sort.Slice(rss, func(i, j int) bool { return rss[i] < rss[j] })
	sortDur(big)
	sortDur(idle)
	mb := func(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
	return [][]string{
		{"1 GiB sequential write: peak RSS of the avfs mount server (VmHWM)", "—", "—", "—", mb(rss[len(rss)/2]), "target < 100 MB", mb(rss[0]) + "–" + mb(rss[len(rss)-1]), "—"},
		{"unmount after it (SIGTERM to the server's exit)", "—", "—", fmtDur(median(npUnmounts)), fmtDur(median(big)), "target < 20 ms", fmtDur(big[0]) + "–" + fmtDur(big[len(big)-1]),
			fmt.Sprintf("%.2f×", float64(median(big))/float64(median(npUnmounts)))},
		{"unmount of an idle mount (SIGTERM to the server's exit)", "—", "—", "—", fmtDur(median(idle)), "target < 20 ms", fmtDur(idle[0]) + "–" + fmtDur(idle[len(idle)-1]), "—"},
	}
}
