// Package sandbox holds a command in Linux namespaces whose view of the
// world is the vault at /workspace and nothing the policy did not grant.
package sandbox

import (
	"slices"

	"avfs/wire"
)

// DefaultWorkspace is where a sandboxed command sees the vault, unless
// sandbox.workspace in the config says otherwise.
const DefaultWorkspace = "/workspace"

// SystemDirs are the host directories a sandbox shows read-only, at the
// same paths, when they exist. /etc is not among them: the sandbox shows a
// curated /etc (see etcFiles).
var SystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// ScratchDirs are the directories private to every sandbox, besides its
// home: nothing in them is the host's.
var ScratchDirs = []string{"/tmp", "/dev", "/proc"}

// Input is input.sandbox for a run held in mode: the view the policy
// decides about. workspace is where the command sees the vault and home its
// HOME; reason says why mode is none.
func Input(mode wire.SandboxMode, reason, workspace, home string) wire.SandboxInput {
	in := wire.SandboxInput{Mode: mode, Reason: reason, Workspace: workspace, Home: home,
		ReadOnlySystem: []string{}, Scratch: []string{}}
	if mode == wire.SandboxNamespaces {
		in.ReadOnlySystem = append(slices.Clone(SystemDirs), "/etc")
		in.Scratch = append(slices.Clone(ScratchDirs), home)
	}
	return in
}
