# METADATA
# title: Test helpers
# description: |
#   Builders of input documents shaped exactly like wire.Input (see
#   wire/input.go and docs/input.md), the way engine.Parse fills them.
package avfs.testing

# cmd is the command object engine.Parse makes for a plain argv.
cmd(argv) := with_fields(argv, {})

# with_fields is cmd(argv) with some fields replaced (origin, wrappers, redirects …).
with_fields(argv, extra) := object.union(
	{
		"argv": argv,
		"raw": concat(" ", argv),
		"program": basename(argv[0]),
		"program_path": "",
		"args": args,
		"flags": [f | some a in args; some f in arg_flags(a)],
		"flag_values": {},
		"operands": [a | some a in args; not startswith(a, "-")],
		"wrappers": [],
		"assignments": {},
		"redirects": [],
		"origin": "argv",
		"pipeline": 0,
		"pipeline_len": 1,
		"reads_stdin_script": false,
	},
	extra,
) if {
	args := array.slice(argv, 1, count(argv))
}

basename(p) := parts[count(parts) - 1] if parts := split(p, "/")

arg_flags(a) := [split(a, "=")[0]] if startswith(a, "--")

arg_flags(a) := [concat("", ["-", c]) | some c in split(substring(a, 1, -1), "")] if {
	startswith(a, "-")
	not startswith(a, "--")
	a != "-"
}

# wrapped is cmd(argv) run by wrappers, outermost first (["sudo"], ["env"] …).
wrapped(wrappers, argv) := with_fields(argv, {
	"wrappers": [{"name": w[0], "argv": w} | some w in wrappers],
	"argv": argv,
})

# in_script marks commands as found in a shell script.
in_script(cmds) := [object.union(c, {"origin": "script"}) | some c in cmds]

# piped marks commands as the stages of one pipeline.
piped(cmds) := [object.union(c, {"pipeline": i, "pipeline_len": count(cmds)}) | some i, c in cmds]

# script is a parsed script object with some fields replaced.
script(source, extra) := object.union(
	{
		"source": source,
		"shell": "sh",
		"has_substitution": false,
		"pipes_to_shell": false,
		"parse_error": "",
		"redirects": [],
		"functions": [],
	},
	extra,
)

# shell_doc is the input of a --shell script in which engine.Parse found no
# simple command: the top-level command is an empty placeholder.
shell_doc(scr) := object.union(doc([with_fields([""], {"argv": [], "raw": "", "program": "", "args": [], "flags": [], "operands": [], "origin": "script"})], scr, []), {"commands": []})

# doc is a whole input document.
doc(cmds, scr, paths) := {
	"schema_version": 1,
	"command": cmds[0],
	"commands": cmds,
	"script": scr,
	"paths": paths,
	"cwd": "/",
	"env": ["HOME", "PATH"],
	"vault": {
		"name": "default",
		"files": 3,
		"bytes": 1024,
		"quotas": {"max_size_mb": 0, "max_files": 0, "max_file_size_mb": 0},
		"parent": "",
	},
	"request": {"timeout_ms": 0, "readonly": false, "approval_id": ""},
	"sandbox": no_sandbox,
}

# no_sandbox is input.sandbox of a run without a sandbox.
no_sandbox := {"mode": "none", "reason": "--sandbox none", "workspace": "", "home": "/root", "read_only_system": [], "scratch": []}

# namespaces is input.sandbox of a run in a sandbox, as sandbox.Input builds it.
namespaces := {
	"mode": "namespaces",
	"reason": "",
	"workspace": "/workspace",
	"home": "/root",
	"read_only_system": ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/etc"],
	"scratch": ["/tmp", "/dev", "/proc", "/root"],
}

# sandboxed is the document inp of a run in a sandbox.
sandboxed(inp) := object.union(inp, {"sandbox": namespaces})

# approved is the document inp of a run that comes with an approval id.
approved(inp, id) := object.union(inp, {"request": {"timeout_ms": 0, "readonly": false, "approval_id": id}})

# argv_input is the input for one plain command.
argv_input(argv) := doc([cmd(argv)], null, [])

# sh_c is the input for sh -c "source" whose script holds cmds (already
# marked with in_script, piped … as needed).
sh_c(source, cmds, extra) := doc(
	array.concat([cmd(["sh", "-c", source])], cmds),
	script(source, extra),
	[],
)

# path_entry is one entry of input.paths, vault when inside and outside
# otherwise.
path_entry(arg, path, true, source) := where_entry(arg, path, "vault", source)

path_entry(arg, path, false, source) := where_entry(arg, path, "outside", source)

# where_entry is one entry of input.paths that names where; inside_vault
# agrees with it.
where_entry(arg, path, where, source) := {
	"arg": arg,
	"path": path,
	"inside_vault": where == "vault",
	"where": where,
	"source": source,
	"command": 0,
}

# result is the decision for inp.
result(inp) := r if {
	r := data.avfs.decision with input as inp
}

# decision_of is the decision string for inp.
decision_of(inp) := result(inp).decision

# ids are the reason ids for inp.
ids(inp) := {r.id | some r in result(inp).reasons}
