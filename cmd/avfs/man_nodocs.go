//go:build urfave_cli_no_docs

package main

import (
	_ "embed"

	"github.com/urfave/cli/v2"
)

// manual is the page `make man` generated; TestManPageCurrent fails when it
// is out of date with the commands.
//
//go:embed avfs.1
var manual string

// manPage returns the generated manual page (this build leaves out the
// generator, whose start-up cost every command would pay).
func manPage(*cli.App) (string, error) { return manual, nil }
