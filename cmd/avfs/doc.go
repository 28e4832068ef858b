// Command avfs is a thin urfave/cli adapter over the avfs packages: it parses
// flags, calls the library, and presents results and errors (as one JSON
// document with --json, or for people without it). Only this package touches
// os.Args, os.Exit and stdout. One file per command group.
package main
