package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/urfave/cli/v2"
)

// versionInfo is the JSON document of `avfs version`.
type versionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
}

func versionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print the avfs version",
		UsageText: "avfs version [--json]",
		Action: func(c *cli.Context) error {
			v := versionInfo{Version: version, Go: runtime.Version()}
			return e.emit(v, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "avfs %s (%s)\n", v.Version, v.Go)
				return err
			})
		},
	}
}
