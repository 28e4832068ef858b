// The sandbox's init: the first process in the run's namespaces.
//
// avfs starts its own binary (with vfork: a clone that makes namespaces
// would copy the address space of avfs, and every page avfs writes
// afterwards would fault) with _AVFS_SANDBOX_INIT=1 and
// _AVFS_SANDBOX_NS="UID GID NET" in its environment. The constructor below
// runs before the Go runtime starts. launch makes the namespaces (user,
// mount, PID, IPC, UTS, cgroup, and network unless it is granted) and
// clones the init into them as avfs's own child (CLONE_PARENT), then
// exits. The init reads the plan the Go side wrote (plan.go: every mount,
// file and rule, decided there), builds the view, applies Landlock, and
// forks the command; it then stays as PID 1 of the run's PID namespace:
// it reaps, forwards avfs's signals to every process of the run, and when
// the command exits ends what the command left behind and reports both.
//
// Why C: a Go process start costs about 30 ms on our machines (the
// package initialisers of the binary's dependencies), a plain exec about
// 1 ms, and the sandbox must cost under 5 ms a run. The init does no
// policy of its own: what to mount, where, read-only or not, is all in the
// plan.
//
// Protocol. fd 3 is the plan: records, each a decimal field count and NUL,
// then that many NUL-terminated fields. fd 4 is the status pipe; launch
// and the init write lines:
//   "pid PID\n"              the init was cloned: its pid (in avfs's namespace), first;
//   "prepared\n"             a prepared sandbox (the plan's "await" record) has built the
//                            part of its view that does not depend on the run, and waits;
//   "ready ABI\n"            the view is built, Landlock ABI ABI applied (0: none), the command starts;
//   "error STEP OP ERRNO MSG\n" set-up step STEP (op OP) failed with ERRNO: nothing ran;
//   "exit STATUS KILLED\n"   the command's raw wait status, and how many processes it left
//                            that had to be ended.
// If avfs dies, the init gets SIGKILL (PR_SET_PDEATHSIG), and with it the
// whole PID namespace.
//
// A prepared sandbox (pool.go) is one whose plan ends with "await": the
// init builds that much, says "prepared", and waits on fd 5, a Unix
// socket, for one message whose descriptors are the rest of the plan (a
// memfd, read like fd 3), the command's stdin, stdout and stderr, and the
// trees to attach (open_tree clones made by avfs: "attach I PATH" moves
// the I-th one to PATH of the view). The end of that socket without a
// message ends the init: the prepared sandbox was not needed. Its plan
// pivots before it waits (plan.go's prepared says why), so the rest's
// paths are the view's own.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PLAN_FD 3
#define STATUS_FD 4
#define CONTROL_FD 5
#define MAX_TREES 4
#define MAX_PLAN (64 << 20)

// Landlock, defined here: the C library's headers may predate the ABI
// versions the kernel offers.
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
// move_mount, likewise (<linux/mount.h> clashes with <sys/mount.h> in some
// C libraries).
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REFER (1ULL << 13)
#define LL_FS_TRUNCATE (1ULL << 14)
#define LL_FS_IOCTL_DEV (1ULL << 15)
#define LL_NET_BIND_TCP (1ULL << 0)
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1 << 0)
#define SECBIT_NOROOT_LOCKED (1 << 1)
#define SECBIT_NO_SETUID_FIXUP (1 << 2)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1 << 3)
#define SECBIT_KEEP_CAPS_LOCKED (1 << 5)
#define SECBIT_NO_CAP_AMBIENT_RAISE (1 << 6)
#define SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED (1 << 7)
#endif

static char root[4096];        // the host directory the view is built on
static int step;               // the plan record being carried out, for errors
static const char *op = "plan";
static char **cmd_env;
static int cmd_envc;
static char **cmd_argv;
static long grace_ms = 5000;
static int ll_abi;

static void say(const char *fmt, ...) {
	char buf[8192];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0) return;
	if (n >= (int)sizeof buf) n = sizeof buf - 1;
	for (int off = 0; off < n;) {
		ssize_t w = write(STATUS_FD, buf + off, n - off);
		if (w < 0 && errno == EINTR) continue;
		if (w <= 0) return;
		off += w;
	}
}

// fail reports the failed step and ends the init: nothing has run.
static void fail(int err, const char *what) {
	char clean[1024];
	snprintf(clean, sizeof clean, "%s", what);
	for (char *p = clean; *p; p++)
		if (*p == '\n') *p = ' ';
	say("error %d %s %d %s\n", step, op, err, clean);
	_exit(125);
}

static void failf(int err, const char *fmt, const char *a) {
	char msg[1024];
	snprintf(msg, sizeof msg, fmt, a);
	fail(err, msg);
}

// in returns ROOT followed by the view path p.
static const char *in(const char *p) {
	static char buf[2][8192];
	static int k;
	k ^= 1;
	if (snprintf(buf[k], sizeof buf[k], "%s%s", root, p) >= (int)sizeof buf[k]) fail(ENAMETOOLONG, p);
	return buf[k];
}

static void mkdirs(const char *path, mode_t mode) {
	char tmp[8192];
	snprintf(tmp, sizeof tmp, "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/') continue;
		*p = 0;
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST) failf(errno, "mkdir %s", tmp);
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST) failf(errno, "mkdir %s", tmp);
}

static void touch(const char *path) {
	char dir[8192];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		mkdirs(dir, 0755);
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 && errno != EEXIST) failf(errno, "create %s", path);
	if (fd >= 0) close(fd);
}

// mountflags are the flags of the mount at path that a remount inside a
// user namespace must keep (the kernel locks them): a read-only mount
// stays read-only.
static unsigned long mountflags(const char *path) {
	struct statvfs sv;
	if (statvfs(path, &sv) < 0) failf(errno, "statvfs %s", path);
	unsigned long f = 0;
	if (sv.f_flag & ST_RDONLY) f |= MS_RDONLY;
	if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME) f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME) f |= MS_RELATIME;
	return f;
}

// unescape decodes mountinfo's octal escapes (\040) in place.
static void unescape(char *s) {
	char *o = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = 0;
}

// remount changes every mount at or below target (a recursive bind
// brings the source's submounts along) to read-only, nosuid and, unless
// dev, nodev, keeping the flags the kernel locks.
static void remount(const char *target, int ro, int dev) {
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f) fail(errno, "open /proc/self/mountinfo");
	size_t tl = strlen(target);
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		// id parent major:minor root mountpoint ...
		char *save, *tok = strtok_r(line, " ", &save);
		for (int i = 0; tok && i < 4; i++) tok = strtok_r(NULL, " ", &save);
		if (!tok) continue;
		unescape(tok);
		if (strncmp(tok, target, tl) != 0 || (tok[tl] != 0 && tok[tl] != '/')) continue;
		unsigned long fl = MS_BIND | MS_REMOUNT | MS_NOSUID | mountflags(tok);
		if (ro) fl |= MS_RDONLY;
		if (!dev) fl |= MS_NODEV;
		if (mount(NULL, tok, NULL, fl, NULL) < 0) {
			// An unreadable submount (a dead FUSE mount, say) cannot be
			// remounted; it cannot be written through either.
			if (errno == EACCES || errno == ENOTCONN) continue;
			failf(errno, "remount %s", tok);
		}
	}
	free(line);
	fclose(f);
}

static void do_bind(const char *src, const char *dst, const char *flags) {
	int ro = strchr(flags, 'r') != NULL, optional = strchr(flags, 'o') != NULL;
	int dev = strchr(flags, 'v') != NULL;
	struct stat st;
	if (stat(src, &st) < 0) {
		if (optional && (errno == ENOENT || errno == ENOTDIR || errno == EACCES)) return;
		failf(errno, "bind source %s", src);
	}
	const char *t = in(dst);
	if (S_ISDIR(st.st_mode))
		mkdirs(t, 0755);
	else
		touch(t);
	// A plain bind needs one remount; a tree with mounts beneath it (which
	// a user namespace must bring along: EINVAL) needs the table read.
	int rec = 0;
	if (mount(src, t, NULL, MS_BIND, NULL) < 0) {
		if (errno == EINVAL) {
			rec = 1;
			if (mount(src, t, NULL, MS_BIND | MS_REC, NULL) == 0) goto bound;
		}
		if (optional && (errno == ENOENT || errno == EACCES)) return;
		failf(errno, "bind %s", src);
	}
bound:;
	char target[8192];
	snprintf(target, sizeof target, "%s", t);
	if (rec) {
		remount(target, ro, dev);
		return;
	}
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_NOSUID | mountflags(target);
	if (ro) fl |= MS_RDONLY;
	if (!dev) fl |= MS_NODEV;
	if (mount(NULL, target, NULL, fl, NULL) < 0) failf(errno, "remount %s", target);
}

static void do_tmpfs(const char *dst, const char *mode, const char *opts) {
	const char *t = in(dst);
	mkdirs(t, 0755);
	char data[512];
	snprintf(data, sizeof data, "mode=%s%s%s", mode, *opts ? "," : "", opts);
	if (mount("tmpfs", t, "tmpfs", MS_NOSUID | MS_NODEV, data) < 0) failf(errno, "tmpfs %s", dst);
}

static void do_file(const char *dst, const char *mode, const char *content) {
	const char *t = in(dst);
	touch(t);
	int fd = open(t, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) failf(errno, "open %s", dst);
	size_t n = strlen(content);
	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, content + off, n - off);
		if (w < 0 && errno == EINTR) continue;
		if (w < 0) failf(errno, "write %s", dst);
		off += w;
	}
	if (fchmod(fd, strtol(mode, NULL, 8)) < 0) failf(errno, "chmod %s", dst);
	close(fd);
}

static void do_symlink(const char *target, const char *dst) {
	const char *t = in(dst);
	char dir[8192];
	snprintf(dir, sizeof dir, "%s", t);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		mkdirs(dir, 0755);
	}
	if (symlink(target, t) < 0 && errno != EEXIST) failf(errno, "symlink %s", dst);
}

static void do_lo(void) {
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) fail(errno, "socket");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) fail(errno, "get lo flags");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) fail(errno, "bring lo up");
	close(s);
}

static void do_pivot(void) {
	if (chdir(root) < 0) fail(errno, "chdir to the new root");
	if (syscall(SYS_pivot_root, ".", ".") < 0) fail(errno, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0) fail(errno, "detach the old root");
	if (chdir("/") < 0) fail(errno, "chdir /");
	root[0] = 0; // from here on, view paths are real paths
}

// ll_rule allows access beneath path; a path that is not there is skipped.
static void ll_rule(int rs, const char *path, uint64_t access) {
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT) return;
		failf(errno, "landlock: open %s", path);
	}
	struct stat st;
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
		access &= LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV;
	struct ll_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
	if (syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &pb, 0) < 0) failf(errno, "landlock: rule for %s", path);
	close(fd);
}

// do_landlock restricts the init, and so every process of the run, to
// the view: read and execute everywhere in it, write only beneath the
// paths given as rw (and dev, which also allows device ioctls), no TCP
// bind or connect unless net is "allow".
static void do_landlock(char **f, int n) {
	int abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (abi < 0) {
		ll_abi = 0;
		if (errno == ENOSYS || errno == EOPNOTSUPP) return; // no Landlock in this kernel: the namespaces hold alone
		fail(errno, "landlock: version");
	}
	uint64_t fs = (1ULL << 13) - 1; // ABI 1: execute … make_sym
	if (abi >= 2) fs |= LL_FS_REFER;
	if (abi >= 3) fs |= LL_FS_TRUNCATE;
	if (abi >= 5) fs |= LL_FS_IOCTL_DEV;
	struct ll_ruleset_attr attr = {.handled_access_fs = fs};
	if (abi >= 4 && strcmp(f[1], "allow") != 0) attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
	if (abi >= 6) attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
	size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
	int rs = syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (rs < 0) fail(errno, "landlock: create ruleset");
	ll_rule(rs, "/", LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR);
	// f: landlock NET rw... -- dev...
	int i = 2, dev = 0;
	for (; i < n; i++) {
		if (strcmp(f[i], "--") == 0) {
			dev = 1;
			continue;
		}
		uint64_t a = fs;
		if (!dev) a &= ~LL_FS_IOCTL_DEV;
		ll_rule(rs, f[i], a);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) fail(errno, "no_new_privs");
	if (syscall(SYS_landlock_restrict_self, rs, 0) < 0) fail(errno, "landlock: restrict");
	close(rs);
	ll_abi = abi;
}

// dropcaps leaves the command no capability, even as uid 0 of its user
// namespace, and no way to gain one (no_new_privs, locked securebits).
static int dropcaps(void) {
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -1;
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	for (int c = 0; c <= 63; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) return -1;
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
	                                 SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
	          0, 0, 0) < 0)
		return -1;
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	return syscall(SYS_capset, &h, d);
}

static const char *envget(const char *key) {
	size_t kl = strlen(key);
	for (int i = cmd_envc - 1; i >= 0; i--)
		if (strncmp(cmd_env[i], key, kl) == 0 && cmd_env[i][kl] == '=') return cmd_env[i] + kl + 1;
	return NULL;
}

static void complain(const char *name, const char *problem) {
	char buf[4096];
	int n = snprintf(buf, sizeof buf, "avfs: %s: %s\n", name, problem);
	if (n > 0) (void)!write(2, buf, n < (int)sizeof buf ? n : (int)sizeof buf - 1);
}

// run execs the command like execvp, on the PATH of its own environment;
// a program not found is 127, one that cannot run 126, as a shell says.
static void run(void) {
	const char *file = cmd_argv[0];
	if (strchr(file, '/')) {
		execve(file, cmd_argv, cmd_env);
		int e = errno;
		complain(file, e == ENOENT ? "no such file or directory" : strerror(e));
		_exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
	}
	const char *path = envget("PATH");
	if (!path) path = "/bin:/usr/bin";
	int denied = 0;
	char buf[8192];
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		int dl = end - p;
		if (dl == 0)
			snprintf(buf, sizeof buf, "%s", file);
		else
			snprintf(buf, sizeof buf, "%.*s/%s", dl, p, file);
		struct stat st;
		int isdir = stat(buf, &st) == 0 && S_ISDIR(st.st_mode); // a directory on the PATH counts as not found
		if (!isdir) {
			execve(buf, cmd_argv, cmd_env);
			if (errno == EACCES || errno == EPERM || errno == ENOEXEC || errno == ELIBBAD || errno == ETXTBSY) denied = errno;
			else if (errno == ENOENT && stat(buf, &st) == 0) {
				complain(file, "bad interpreter: the program its #! line names is not there");
				_exit(126);
			}
		}
		if (!*end) break;
		p = end;
	}
	if (denied) {
		complain(file, strerror(denied));
		_exit(126);
	}
	complain(file, "command not found");
	_exit(127);
}

static long elapsed_ms(struct timespec *since) {
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

static void on_signal(int sig) { (void)sig; }

// others counts the processes of the run besides the init and the
// command (pid child, 0 once reaped): those it left behind. They are
// counted from the run's own /proc when the end begins, not as they are
// reaped: a process that dies with its parent may be reaped by it.
static int others(pid_t child) {
	DIR *d = opendir("/proc");
	if (!d) return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 1 || pid == child) continue;
		n++;
	}
	closedir(d);
	return n;
}

// ends reports whether sig, from avfs, ends the run: it reaches every
// process, and SIGKILL follows after the grace. Other signals are only
// passed on.
static int ends(int sig) { return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT; }

// supervise is PID 1's loop: signals from outside the namespace (avfs's:
// their sender has no pid here) go to every process of the run; signals
// from inside are ignored. The run ends when the command exits (what it
// left gets SIGTERM and SIGCONT) or when avfs sends a signal that ends it
// (a timeout, an interrupt); either way SIGKILL follows after the grace,
// and the init exits when nothing is left. It counts the processes other
// than the command that were still there when the end began.
static int supervise(pid_t child, sigset_t *set) {
	int status = 0, done = 0, ended = 0, ending = 0, killed = 0;
	pid_t live = child; // the command, until reaped
	struct timespec since;
	for (;;) {
		int st;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			if (p == child) {
				status = st;
				done = 1;
				live = 0;
			}
		}
		if (p < 0 && errno == ECHILD) break; // nothing is left
		if (done && !ending) {
			ending = 1;
			ended = others(live);
			clock_gettime(CLOCK_MONOTONIC, &since);
			kill(-1, SIGTERM);
			kill(-1, SIGCONT);
			continue;
		}
		if (ending && !killed && elapsed_ms(&since) >= grace_ms) {
			kill(-1, SIGKILL);
			killed = 1;
		}
		siginfo_t si;
		struct timespec tick = {0, 5 * 1000 * 1000};
		int sig = ending ? sigtimedwait(set, &si, &tick) : sigwaitinfo(set, &si);
		if (sig <= 0 || sig == SIGCHLD) continue;
		if (si.si_pid != 0 || (si.si_code != SI_USER && si.si_code != SI_TKILL && si.si_code != SI_QUEUE)) continue; // from inside the run
		if (ends(sig) && !ending) {
			ending = 1;
			ended = others(live);
			clock_gettime(CLOCK_MONOTONIC, &since);
		}
		kill(-1, sig);
		if (sig != SIGCONT) kill(-1, SIGCONT);
	}
	say("exit %d %d\n", status, ended);
	return 0;
}

// readall reads the whole of fd (a plan) into a new NUL-terminated buffer.
static char *readall(int fd, size_t *len) {
	char *buf = malloc(MAX_PLAN);
	if (!buf) fail(ENOMEM, "plan");
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, MAX_PLAN - 1 - n);
		if (r < 0 && errno == EINTR) continue;
		if (r < 0) fail(errno, "read the plan");
		if (r == 0) break;
		n += r;
		if (n >= MAX_PLAN - 1) fail(E2BIG, "plan too large");
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

static int trees[MAX_TREES]; // what "await" received to attach
static int ntrees;

// await is a prepared sandbox's pause: it says so and waits for the rest
// of the plan and the run's descriptors (see the protocol above). It
// returns the rest of the plan, or ends the init when avfs closed the
// socket instead.
static char *await(size_t *len) {
	say("prepared\n");
	int fds[4 + MAX_TREES];
	char byte;
	struct iovec io = {&byte, 1};
	union {
		char buf[CMSG_SPACE(sizeof fds)];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
	ssize_t r;
	while ((r = recvmsg(CONTROL_FD, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
	}
	if (r == 0) _exit(0); // not needed
	if (r < 0) fail(errno, "receive the run");
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || (m.msg_flags & MSG_CTRUNC)) fail(EINVAL, "the run came without its descriptors");
	int n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	if (n < 4) fail(EINVAL, "the run came without its descriptors");
	memcpy(fds, CMSG_DATA(c), n * sizeof(int));
	close(CONTROL_FD);
	for (int i = 0; i < 3; i++)
		if (dup2(fds[1 + i], i) < 0) fail(errno, "take the run's stdio");
	for (int i = 1; i < 4; i++)
		if (fds[i] > 2) close(fds[i]);
	ntrees = n - 4;
	memcpy(trees, fds + 4, ntrees * sizeof(int));
	char *plan = readall(fds[0], len);
	close(fds[0]);
	return plan;
}

// do_attach moves the I-th tree await received to dst in the view, and
// makes every mount of it nosuid and nodev, as a bind is.
static void do_attach(const char *idx, const char *dst) {
	int i = atoi(idx);
	if (i < 0 || i >= ntrees) fail(EINVAL, "attach: no such tree");
	const char *t = in(dst); // made ahead: the root is read-only by now
	if (syscall(SYS_move_mount, trees[i], "", AT_FDCWD, t, MOVE_MOUNT_F_EMPTY_PATH) < 0) failf(errno, "attach %s", dst);
	close(trees[i]);
	trees[i] = -1;
	char target[8192];
	snprintf(target, sizeof target, "%s", t);
	remount(target, 0, 0);
}

// next returns the next record's fields (and their count in *n), or NULL
// at the end of the plan.
static char **next(char **pos, char *end, int *n) {
	if (*pos >= end) return NULL;
	char *p = *pos;
	long cnt = strtol(p, NULL, 10);
	p += strlen(p) + 1;
	if (cnt <= 0 || cnt > 1 << 20) fail(EINVAL, "bad plan record");
	char **f = calloc(cnt + 1, sizeof *f);
	if (!f) fail(ENOMEM, "plan");
	for (long i = 0; i < cnt; i++) {
		if (p >= end) fail(EINVAL, "short plan record");
		f[i] = p;
		p += strlen(p) + 1;
	}
	*pos = p;
	*n = cnt;
	return f;
}

static int need(int n, int want) {
	if (n < want) fail(EINVAL, "plan record has too few fields");
	return 1;
}

static int sandbox_main(void) {
	prctl(PR_SET_PDEATHSIG, SIGKILL); // also set by launch, with the check that closes the race
	prctl(PR_SET_DUMPABLE, 0);        // nothing in the run may ptrace its init
	size_t len;
	char *plan = readall(PLAN_FD, &len);
	close(PLAN_FD);
	char *pos = plan, *end = plan + len;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) fail(errno, "make mounts private");
	cmd_env = calloc(1, sizeof *cmd_env);
	char **f;
	int n;
	for (step = 0; (f = next(&pos, end, &n)) != NULL; step++) {
		op = f[0];
		if (strcmp(op, "root") == 0 && need(n, 2)) {
			snprintf(root, sizeof root, "%s", f[1]);
			if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0) failf(errno, "tmpfs %s", root);
		} else if (strcmp(op, "tmpfs") == 0 && need(n, 4)) {
			do_tmpfs(f[1], f[2], f[3]);
		} else if (strcmp(op, "bind") == 0 && need(n, 4)) {
			do_bind(f[1], f[2], f[3]);
		} else if (strcmp(op, "dir") == 0 && need(n, 3)) {
			const char *t = in(f[1]);
			mkdirs(t, strtol(f[2], NULL, 8));
			if (chmod(t, strtol(f[2], NULL, 8)) < 0) failf(errno, "chmod %s", f[1]);
		} else if (strcmp(op, "file") == 0 && need(n, 4)) {
			do_file(f[1], f[2], f[3]);
		} else if (strcmp(op, "symlink") == 0 && need(n, 3)) {
			do_symlink(f[1], f[2]);
		} else if (strcmp(op, "proc") == 0 && need(n, 2)) {
			const char *t = in(f[1]);
			mkdirs(t, 0555);
			if (mount("proc", t, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) fail(errno, "mount /proc");
		} else if (strcmp(op, "devpts") == 0 && need(n, 2)) {
			const char *t = in(f[1]);
			mkdirs(t, 0755);
			if (mount("devpts", t, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620") < 0) fail(errno, "mount devpts");
		} else if (strcmp(op, "ro") == 0 && need(n, 2)) {
			const char *t = in(f[1]);
			if (mount(NULL, t, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | mountflags(t), NULL) < 0) failf(errno, "remount %s read-only", f[1]);
		} else if (strcmp(op, "lo") == 0) {
			do_lo();
		} else if (strcmp(op, "hostname") == 0 && need(n, 2)) {
			if (sethostname(f[1], strlen(f[1])) < 0) fail(errno, "sethostname");
		} else if (strcmp(op, "pivot") == 0) {
			do_pivot();
		} else if (strcmp(op, "chdir") == 0 && need(n, 2)) {
			if (chdir(f[1]) < 0) failf(errno, "chdir %s", f[1]);
		} else if (strcmp(op, "landlock") == 0 && need(n, 2)) {
			do_landlock(f, n);
		} else if (strcmp(op, "grace") == 0 && need(n, 2)) {
			grace_ms = strtol(f[1], NULL, 10);
		} else if (strcmp(op, "env") == 0 && need(n, 2)) {
			cmd_env = realloc(cmd_env, (cmd_envc + 2) * sizeof *cmd_env);
			cmd_env[cmd_envc++] = f[1];
			cmd_env[cmd_envc] = NULL;
		} else if (strcmp(op, "exec") == 0 && need(n, 2)) {
			cmd_argv = f + 1;
		} else if (strcmp(op, "await") == 0) {
			plan = await(&len); // the rest of the plan replaces what is left
			pos = plan, end = plan + len;
		} else if (strcmp(op, "attach") == 0 && need(n, 3)) {
			do_attach(f[1], f[2]);
		} else {
			fail(EINVAL, "unknown plan record");
		}
	}
	op = "start";
	if (!cmd_argv) { // a probe: the view could be built
		say("ready %d\n", ll_abi);
		return 0;
	}

	sigset_t set, old;
	sigfillset(&set);
	sigdelset(&set, SIGKILL);
	sigdelset(&set, SIGSTOP);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP && s != SIGSEGV && s != SIGBUS && s != SIGFPE && s != SIGILL) sigaction(s, &sa, NULL);
	sigprocmask(SIG_BLOCK, &set, &old);
	say("ready %d\n", ll_abi);
	pid_t child = fork();
	if (child < 0) fail(errno, "fork");
	if (child == 0) {
		close(STATUS_FD);
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = SIG_DFL;
		for (int s = 1; s < NSIG; s++)
			if (s != SIGKILL && s != SIGSTOP) sigaction(s, &sa, NULL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		setsid();
		if (dropcaps() < 0) {
			complain(cmd_argv[0], "cannot drop capabilities");
			_exit(126);
		}
		run();
	}
	return supervise(child, &set);
}

// write_file writes s to the /proc file path, or fails the set-up.
static void write_file(const char *path, const char *s) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) failf(errno, "open %s", path);
	ssize_t n = write(fd, s, strlen(s));
	int err = errno;
	close(fd);
	if (n != (ssize_t)strlen(s)) failf(n < 0 ? err : EIO, "write %s", path);
}

// launch makes the run's namespaces and starts the init in them; it runs
// in the process avfs started (with vfork: avfs's memory is not copied),
// still single-threaded. spec is "UID GID NET": the identity mapped (the
// process's own) and whether the run gets a network namespace of its own.
//
// It enters a user namespace of its own (unshare), maps UID and GID to
// themselves (setgroups denied first, as the kernel requires of a
// process mapping itself), then the other namespaces, and clones the
// init with CLONE_PARENT: the init, PID 1 of the new PID namespace, is
// avfs's own child, as if avfs had cloned it. It writes "pid PID\n" (the
// init's pid outside) on the status pipe and exits; a step that fails is
// reported as the init reports its own ("error STEP OP ERRNO MSG") and
// nothing runs.
static int launch(const char *spec) {
	op = "clone"; // the step a refusal names, as when avfs cloned the namespaces itself
	unsigned long uid, gid;
	int net;
	if (sscanf(spec, "%lu %lu %d", &uid, &gid, &net) != 3) fail(EINVAL, "bad namespace request");
	if (unshare(CLONE_NEWUSER) < 0) fail(errno, "unshare the user namespace");
	char m[64];
	write_file("/proc/self/setgroups", "deny");
	snprintf(m, sizeof m, "%lu %lu 1\n", uid, uid);
	write_file("/proc/self/uid_map", m);
	snprintf(m, sizeof m, "%lu %lu 1\n", gid, gid);
	write_file("/proc/self/gid_map", m);
	int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
	if (net) flags |= CLONE_NEWNET;
	if (unshare(flags) < 0) fail(errno, "unshare the namespaces");
	// The init says nothing before the pid line is written: it waits for
	// the end of this pipe, which closes when launch exits.
	int turn[2];
	if (pipe2(turn, O_CLOEXEC) < 0) fail(errno, "pipe");
	long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
	if (pid < 0) fail(errno, "clone the init");
	if (pid == 0) {
		close(turn[1]);
		// avfs's death sends the init SIGKILL from now on; should it have
		// died before, its end of the status pipe is closed: then end.
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		struct pollfd pf = {STATUS_FD, 0, 0};
		if (poll(&pf, 1, 0) < 0 || (pf.revents & (POLLERR | POLLHUP | POLLNVAL))) _exit(125);
		char c;
		while (read(turn[0], &c, 1) < 0 && errno == EINTR) {
		}
		close(turn[0]);
		_exit(sandbox_main());
	}
	close(turn[0]);
	say("pid %ld\n", pid);
	return 0; // closes turn[1]: the init goes on
}

__attribute__((constructor)) static void avfs_sandbox_entry(void) {
	const char *v = getenv("_AVFS_SANDBOX_INIT");
	if (v == NULL || strcmp(v, "1") != 0) return;
	const char *ns = getenv("_AVFS_SANDBOX_NS");
	if (ns != NULL) _exit(launch(ns));
	_exit(sandbox_main());
}
