package wire

// InputSchemaVersion is the version of the policy input document.
const InputSchemaVersion = 1

// Input is the document the policy engine evaluates (input in Rego). It is
// built by engine.Parse from one top-level command and documented field by
// field in docs/input.md.
type Input struct {
	SchemaVersion int `json:"schema_version"`
	// Command is the top-level command after wrappers were unwrapped.
	Command Command `json:"command"`
	// Commands is every simple command found, the top-level one first, then
	// every command inside shell scripts, substitutions and eval strings.
	Commands []Command `json:"commands"`
	// Script is set when a shell script was parsed (sh -c "…" or --shell).
	Script *Script `json:"script"`
	// Paths holds every argument or redirect target that looks like a path.
	Paths   []Path       `json:"paths"`
	Cwd     string       `json:"cwd"` // vault-absolute working directory ("/" is the vault root)
	Env     []string     `json:"env"` // names of the variables the command will see
	Vault   VaultInput   `json:"vault"`
	Request RequestInput `json:"request"`
	// Sandbox says how the command will be held (see SandboxInput).
	Sandbox SandboxInput `json:"sandbox"`
}

// Command is one simple command: argv after wrappers were unwrapped.
type Command struct {
	Argv        []string          `json:"argv"`         // the command's words, wrappers removed
	Raw         string            `json:"raw"`          // the command as written (argv joined and quoted, or script source)
	Program     string            `json:"program"`      // basename of the real program ("/usr/bin/curl" gives "curl")
	ProgramPath string            `json:"program_path"` // resolved on PATH; "" when not found
	Args        []string          `json:"args"`         // every word after the program
	Flags       []string          `json:"flags"`        // flags: "-rf" gives "-r","-f"; "--out=x" gives "--out"
	FlagValues  map[string]string `json:"flag_values"`  // values attached to a flag: --name=value, -o/tmp/x
	Operands    []string          `json:"operands"`     // args that are not flags ("git status" gives ["status"])
	Wrappers    []Wrapper         `json:"wrappers"`     // wrappers peeled off, outermost first
	Assignments map[string]string `json:"assignments"`  // VAR=value from leading assignments and env
	Redirects   []Redirect        `json:"redirects"`    // redirects attached to this command (scripts only)
	// Origin says where the command was found: "argv" (top level), "script"
	// (a shell script), "substitution" ($(…), backticks, <(…)), "eval"
	// (a literal eval, trap or alias string), "xargs" (run by xargs), "find"
	// (run by find -exec, -execdir, -ok or -okdir), "git_config" (a shell
	// command git runs from its configuration: git -c core.sshCommand=…,
	// alias.x=!…, GIT_SSH_COMMAND, GIT_PAGER, GIT_CONFIG_PARAMETERS …; one
	// whose value is not literal is a single dynamic command named by it).
	Origin string `json:"origin"`
	// Pipeline is the index of this command within its pipeline (0 for the
	// first or a command not in a pipeline) and PipelineLen its length.
	Pipeline    int `json:"pipeline"`
	PipelineLen int `json:"pipeline_len"`
	// ReadsStdinScript is true for a shell or interpreter that reads its
	// program from stdin (sh, bash -s, python -, …).
	ReadsStdinScript bool `json:"reads_stdin_script"`
	// Dynamic is true when some word of the command is not a literal
	// ($VAR, $(…), …): such words hold their source text and the real argv
	// is only known when the shell runs.
	Dynamic bool `json:"dynamic"`
	// Spec names the program spec that classified the command's words:
	// the program and the subcommands it selected ("git commit", "sort"),
	// or "" when no spec knows the program and its words were classified
	// by their shape (docs/policy.md, "Program specs").
	Spec string `json:"spec"`
	// Code holds the words the spec says are program text in the
	// program's own language (sed's script, awk's program, jq's filter),
	// in order; they are never paths.
	Code []string `json:"code"`
	// LocalBin is the vault path of the program that a runner of packages
	// (npx NAME, npm exec NAME, npm x NAME) runs from a node_modules/.bin
	// of the vault, found in the command's directory or the nearest
	// ancestor that has one, as npx looks: such a run fetches nothing.
	// "" for other commands, when NAME is not found there, when an
	// option comes before NAME or NAME is not a plain name (eslint@8,
	// @scope/pkg, a path: npx might fetch), and when the parser was not
	// given the vault.
	LocalBin string `json:"local_bin"`
	// Function is the name of the function whose body holds the command
	// ("f" for the commands of f(){ …; }), "" outside function bodies.
	Function string `json:"function"`
	// Background is true when the command runs asynchronously: it, or a
	// statement or pipeline holding it, ends with & (or is a coprocess).
	Background bool `json:"background"`
	// Feeds is, for a command inside a command or process substitution,
	// the index in Commands of the command whose words, assignments or
	// redirections hold that substitution: the one the output goes to
	// (the python of python -c "$(curl …)", the bash of bash <(curl …) and
	// bash < <(curl …), the echo of echo "$(curl …)"). -1 for other
	// commands, and for substitutions in loop headers, case words and
	// tests.
	Feeds int `json:"feeds"`
}

// Wrapper is a program that runs another one (env, sudo, timeout, xargs, busybox …).
type Wrapper struct {
	Name string   `json:"name"` // basename ("sudo", "env", "busybox")
	Argv []string `json:"argv"` // the wrapper's own words, options included
	// Flags are the options given, a long option under its short alias when
	// it has one ("--user=root" gives "-u").
	Flags []string `json:"flags"`
	// FlagValues holds the value of each option that takes one
	// ("sudo -u root" gives {"-u": "root"}); the last one wins.
	FlagValues map[string]string `json:"flag_values"`
	// Operands are the wrapper's own operands before the command
	// (timeout's DURATION, flock's FILE, chrt's PRIORITY).
	Operands []string `json:"operands"`
}

// Script describes a parsed shell script.
type Script struct {
	Source          string     `json:"source"`
	Shell           string     `json:"shell"` // "sh", "bash", … or "" for --shell
	HasSubstitution bool       `json:"has_substitution"`
	PipesToShell    bool       `json:"pipes_to_shell"`
	ParseError      string     `json:"parse_error"` // "" when the script parsed
	Redirects       []Redirect `json:"redirects"`   // every redirect in the script
	Functions       []string   `json:"functions"`   // names of functions defined
}

// Redirect is one shell redirection.
type Redirect struct {
	Op     string `json:"op"`     // ">", ">>", "<", "2>", "&>", "<<", "<(", …
	Target string `json:"target"` // the word after the operator
}

// Path is an argument or redirect target that looks like a path.
type Path struct {
	Arg         string `json:"arg"`          // as written
	Path        string `json:"path"`         // resolved: vault-absolute when inside (an absolute path in the workspace too), else absolute ("~/x" for home, "/../x" above the vault root)
	InsideVault bool   `json:"inside_vault"` // true exactly when Where is "vault"
	Where       Where  `json:"where"`        // what the path names in the command's view (vault, scratch, read_only_system, outside, unknown)
	Source      string `json:"source"`       // "arg" or "redirect"
	Command     int    `json:"command"`      // index into Commands
	Role        Role   `json:"role"`         // what the command does with it: read, write, execute, or "" when not known
}

// Role is what a command does with a path it names.
type Role string

// Roles of a path (Path.Role).
const (
	RoleRead    Role = "read"    // the command reads it (a file, or a directory it lists or walks)
	RoleWrite   Role = "write"   // the command creates, changes or removes it
	RoleExecute Role = "execute" // the command runs its content as code (sh FILE, make -f FILE, ./FILE)
	RoleUnknown Role = ""        // named by the command; whether it reads or writes it is not known
)

// VaultInput describes the vault the command would run in.
type VaultInput struct {
	Name   string     `json:"name"`
	Files  int64      `json:"files"`
	Bytes  int64      `json:"bytes"`
	Quotas QuotaInput `json:"quotas"`
	Parent string     `json:"parent"`
}

// QuotaInput are the vault's quotas; 0 means unlimited.
type QuotaInput struct {
	MaxSizeMB     int64 `json:"max_size_mb"`
	MaxFiles      int64 `json:"max_files"`
	MaxFileSizeMB int64 `json:"max_file_size_mb"`
}

// RequestInput are the options the caller gave for this run.
type RequestInput struct {
	TimeoutMS  int64  `json:"timeout_ms"`
	Readonly   bool   `json:"readonly"`
	ApprovalID string `json:"approval_id"`
}
