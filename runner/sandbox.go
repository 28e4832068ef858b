package runner

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"avfs/sandbox"
	"avfs/wire"
)

// Sandbox modes (--sandbox, sandbox.mode in the config).
const (
	SandboxAuto       = "auto"       // namespaces where the kernel allows them, else none (said in the envelope and input.sandbox)
	SandboxNamespaces = "namespaces" // namespaces or nothing runs (exit 125, sandbox_unavailable)
	SandboxNone       = "none"       // no sandbox: the command runs with avfs's own authority
)

// Defaults of SandboxConfig.
const (
	DefaultTmpSize  int64 = 1 << 30 // /tmp, the home and /dev/shm of a sandbox, each
	DefaultCacheMax int64 = 2 << 30 // a vault's tool cache
)

// DefaultHomeFiles are the dotfiles of the invoking user a sandbox shows,
// read-only, unless sandbox.home_files says otherwise.
var DefaultHomeFiles = []string{".gitconfig"}

// SandboxConfig is how runs are held (the "sandbox" section of the
// config).
type SandboxConfig struct {
	// Mode is auto (""), namespaces or none; Request.Sandbox overrides it.
	Mode string
	// Workspace is where a sandboxed command sees the vault
	// (sandbox.DefaultWorkspace when "").
	Workspace string
	// HomeFiles are paths relative to the invoking user's home shown
	// read-only in the sandbox's home (DefaultHomeFiles when nil).
	HomeFiles []string
	// GitName and GitEmail are the identity git falls back to in the
	// sandbox (the user's own git config wins); the user's name and
	// NAME@avfs.invalid when "".
	GitName, GitEmail string
	// TmpSize caps /tmp, the home and /dev/shm (DefaultTmpSize when 0).
	TmpSize int64
	// CacheDir holds one tool cache per vault ($AVFS_HOME/cache), bound at
	// ~/.cache in the sandbox; "" for none.
	CacheDir string
	// CacheMax caps a vault's cache (DefaultCacheMax when 0): after a run,
	// the least recently changed tool caches are cleared until it fits.
	CacheMax int64
}

func (c SandboxConfig) cacheMax() int64 {
	if c.CacheMax > 0 {
		return c.CacheMax
	}
	return DefaultCacheMax
}

// cacheEnv points tools' caches into the sandbox's ~/.cache (paths
// relative to it); go-build and pip already use ~/.cache.
var cacheEnv = map[string]string{
	"XDG_CACHE_HOME":    ".",
	"GOMODCACHE":        "go-mod",
	"npm_config_cache":  "npm",
	"YARN_CACHE_FOLDER": "yarn",
}

// view is how a run's command is held, as decided before the policy
// runs: the policy decides about it (input.sandbox).
type view struct {
	input wire.SandboxInput
}

// report is the envelope's sandbox for the view, once the decision gave
// grant; dir is the host directory of the vault.
func (vw view) report(grant wire.SandboxGrant, dir string) *wire.SandboxReport {
	in := vw.input
	if in.Mode != wire.SandboxNamespaces {
		return &wire.SandboxReport{Mode: in.Mode, Reason: in.Reason, Workspace: dir, Home: dir, Network: wire.NetworkHost}
	}
	network := wire.NetworkNone
	if grant.Network == wire.NetworkHost {
		network = wire.NetworkHost
	}
	return &wire.SandboxReport{Mode: in.Mode, Workspace: in.Workspace, Home: in.Home, Network: network}
}

// sandboxMode is the mode req runs in.
func (r *Runner) sandboxMode(req Request) (string, error) {
	m := req.Sandbox
	if m == "" {
		m = r.Sandbox.Mode
	}
	switch m {
	case "":
		return SandboxAuto, nil
	case SandboxAuto, SandboxNamespaces, SandboxNone:
		return m, nil
	}
	return "", wire.Errorf(wire.CodeInvalidInput, "proxy exec: --sandbox must be auto, namespaces or none, not %q", m)
}

func (r *Runner) exe() string {
	if r.Exe != "" {
		return r.Exe
	}
	exe, _ := os.Executable()
	return exe
}

// startProbe asks the kernel for a sandbox in the background (see
// sandbox.Probe), unless req runs without one or the kernel was asked
// already (see probeKey); the function returned waits for the answer.
func (r *Runner) startProbe(req Request) func() error {
	if m, _ := r.sandboxMode(req); m == SandboxNone {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		root, err := r.runRoot()
		key := probeKey()
		if err == nil && key != "" {
			if b, err := readNoFollow(filepath.Join(root.Path(), probeFile)); err == nil && string(b) == key {
				done <- nil
				return
			}
		}
		perr := sandbox.Probe(r.exe(), os.TempDir(), wire.NetworkNone)
		if perr == nil && err == nil && key != "" {
			_ = writeNoFollow(root.Path(), probeFile, []byte(key))
		}
		done <- perr
	}()
	return func() error { return <-done }
}

// probeFile, in the run root, says that the kernel built a sandbox for
// this user (probeKey) since it booted, so that runs need not ask again
// (a probe costs as much CPU as the sandbox itself, while the policy
// loads). Should the kernel refuse later (an administrator turned user
// namespaces off), the run that finds out fails with sandbox_unavailable
// and removes the file (forgetProbe): the next one asks again. Only avfs
// writes the run root; a command that forged the file (without a sandbox,
// it could) gains nothing but a refused run.
const probeFile = "sandbox-probed"

// probeKey names the kernel boot and the user and mount namespaces avfs
// runs in (a container differs from its host), "" when unknown.
func probeKey() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	userNS, err1 := os.Readlink("/proc/self/ns/user")
	mntNS, err2 := os.Readlink("/proc/self/ns/mnt")
	if err1 != nil || err2 != nil {
		return ""
	}
	return fmt.Sprintf("%s %s %s uid=%d\n", strings.TrimSpace(string(boot)), userNS, mntNS, os.Geteuid())
}

// forgetProbe removes probeFile after a sandbox that could not be built.
func (r *Runner) forgetProbe() {
	if root, err := r.runRoot(); err == nil {
		_ = os.Remove(filepath.Join(root.Path(), probeFile))
	}
}

func readNoFollow(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}

// writeNoFollow replaces dir/name with data: written beside it, then
// renamed over it.
func writeNoFollow(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, name+".new-")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// resolveView decides how req's command is held: in namespaces when the
// mode allows and probe found the kernel willing, else none with the
// reason (under namespaces, a refusal fails the run). at, when not "", is
// where the command sees the vault either way: an attached workspace's
// directory.
func (r *Runner) resolveView(req Request, probe func() error, at string) (view, error) {
	mode, err := r.sandboxMode(req)
	if err != nil {
		return view{}, err
	}
	none := func(reason string) view {
		ws := at
		if req.Mountpoint != "" {
			ws, _ = filepath.Abs(req.Mountpoint)
		}
		return view{input: sandbox.Input(wire.SandboxNone, reason, ws, ws)}
	}
	if mode == SandboxNone {
		reason := "--sandbox none"
		if req.Sandbox == "" {
			reason = "sandbox.mode none in the config"
		}
		return none(reason), nil
	}
	if err := probe(); err != nil {
		if mode == SandboxNamespaces {
			return view{}, fmt.Errorf("proxy exec: --sandbox namespaces: %w", err)
		}
		return none("the kernel refused a sandbox: " + err.Error()), nil
	}
	ws := cmp.Or(at, r.Sandbox.Workspace, sandbox.DefaultWorkspace)
	return view{input: sandbox.Input(wire.SandboxNamespaces, "", ws, r.sandboxHome())}, nil
}

// sandboxHome is HOME in a sandbox: the invoking user's home path (tools
// record paths under it: pyenv's shims, a venv's interpreter), as a private
// directory; /home/USER when that path is part of the view already.
func (r *Runner) sandboxHome() string {
	home, _ := os.UserHomeDir()
	home = path.Clean("/" + home)
	clash := home == "/" || home == path.Clean(r.Sandbox.Workspace)
	for _, d := range append(append([]string{"/etc", sandbox.DefaultWorkspace}, sandbox.SystemDirs...), sandbox.ScratchDirs...) {
		if home == d || strings.HasPrefix(home, d+"/") {
			clash = true
		}
	}
	if clash {
		return "/home/" + userName()
	}
	return home
}

func userName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

func groupName() string {
	if g, err := user.LookupGroupId(strconv.Itoa(os.Getgid())); err == nil {
		return g.Name
	}
	return strconv.Itoa(os.Getgid())
}

// cacheDir is the tool cache of a vault.
func (r *Runner) cacheDir(vaultName string) string {
	return filepath.Join(r.Sandbox.CacheDir, vaultName)
}

// sandboxSpec is the sandbox of one run: its view over the workspace ws,
// in the run's own directory.
func (r *Runner) sandboxSpec(req Request, vw view, grant wire.SandboxGrant, ws *workspace, cwd, vaultName string) (*sandbox.Spec, error) {
	in := vw.input
	root := filepath.Join(ws.base, "view")
	if err := os.Mkdir(root, 0o700); err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "proxy exec: sandbox: %v", err)
	}
	hostHome, _ := os.UserHomeDir()
	names := r.Sandbox.HomeFiles
	if names == nil {
		names = DefaultHomeFiles
	}
	var homeFiles []string
	for _, n := range names {
		clean := path.Clean("/" + n)
		if n == "" || strings.Contains(n, "..") || filepath.IsAbs(n) || clean == "/" {
			return nil, wire.Errorf(wire.CodeInvalidInput, "proxy exec: sandbox.home_files: %q is not a path inside the home", n)
		}
		p := filepath.Join(hostHome, clean)
		if _, err := os.Lstat(p); err == nil {
			homeFiles = append(homeFiles, p)
		}
	}
	cache := ""
	if r.Sandbox.CacheDir != "" {
		var err error
		if cache, err = sandbox.OpenCache(r.cacheDir(vaultName)); err != nil {
			return nil, err
		}
	}
	user := userName()
	gitName, gitEmail := r.Sandbox.GitName, r.Sandbox.GitEmail
	if gitName == "" {
		gitName = user
	}
	if gitEmail == "" {
		gitEmail = user + "@avfs.invalid"
	}
	tmp := r.Sandbox.TmpSize
	if tmp <= 0 {
		tmp = DefaultTmpSize
	}
	envPath := lookup(r.environment(req, vw, in.Workspace, ""), "PATH")
	hostMount := ws.dir
	return &sandbox.Spec{
		Dir: path.Join(in.Workspace, cwd), Root: root, Workspace: hostMount, WorkspaceAt: in.Workspace,
		Home: in.Home, HostHome: hostHome, HomeFiles: homeFiles, Cache: cache,
		Toolchains: sandbox.Toolchains(envPath, hostHome, in),
		Network:    grant.Network, UID: os.Getuid(), GID: os.Getgid(), User: user, Group: groupName(),
		GitName: gitName, GitEmail: gitEmail, TmpSize: tmp,
	}, nil
}

// Landlock is the Landlock ABI a sandboxed command was restricted with
// (0 for none, or without a sandbox).
func (p *Proc) Landlock() int {
	if p.sb == nil {
		return 0
	}
	return p.sb.Landlock
}

// checkTrust refuses a run without a sandbox (its command has the
// identity of avfs) while the command could write one of the trusted
// paths that exist, or replace it in its directory: it could grant its own
// approvals or rewrite the policy for the next run. why is why there is no
// sandbox.
func checkTrust(trusted []string, why string) error {
	var writable []string
	for _, p := range trusted {
		if p == "" {
			continue
		}
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if unix.Access(p, unix.W_OK) == nil || unix.Access(filepath.Dir(p), unix.W_OK) == nil {
			writable = append(writable, p)
		}
	}
	if len(writable) == 0 {
		return nil
	}
	return wire.Errorf(wire.CodeWritableTrust, "proxy exec: no sandbox (%s), and the command could rewrite what avfs trusts: %s (give --allow-writable-trust to run it anyway)",
		why, strings.Join(writable, ", ")).With("paths", writable)
}
