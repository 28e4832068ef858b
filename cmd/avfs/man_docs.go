//go:build !urfave_cli_no_docs

package main

import "github.com/urfave/cli/v2"

// manPage renders the manual page of app with urfave/cli's generator. It is
// what `make man` writes to avfs.1; builds without the generator (the
// urfave_cli_no_docs tag) print that file instead (man_nodocs.go).
func manPage(app *cli.App) (string, error) {
	app.Version = "" // the page must not change with every commit
	return app.ToManWithSection(1)
}
