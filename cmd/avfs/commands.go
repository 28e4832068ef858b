package main

import "github.com/urfave/cli/v2"

// commands lists every top-level command; each lives in its own file.
func commands(e *env) []*cli.Command {
	return []*cli.Command{
		versionCommand(e),
		policyCommand(e),
	}
}
