package main

import "github.com/urfave/cli/v2"

// commands lists every top-level command; each lives in its own file.
func commands(e *env) []*cli.Command {
	cmds := []*cli.Command{
		versionCommand(e),
		vaultCommand(e),
		checkpointCommand(e),
		policyCommand(e),
	}
	cmds = append(cmds, filesCommands(e)...)
	cmds = append(cmds, historyCommands(e)...)
	cmds = append(cmds, diffCommand(e))
	cmds = append(cmds, gcCommand(e), quotaCommand(e), retentionCommand(e), auditCommand(e), cacheCommand(e))
	cmds = append(cmds, mountCommand(e), unmountCommand(e))
	cmds = append(cmds, proxyCommand(e), approvalCommand(e))
	cmds = append(cmds, hookCommand(e), mcpCommand(e), serveCommand(e), workspaceCommand(e))
	cmds = append(cmds, vaultFindCommand(e), grepCommand(e), statsCommand(e))
	cmds = append(cmds, labelCommands(e)...)
	cmds = append(cmds, completionCommand(e), manCommand(e))
	return cmds
}
