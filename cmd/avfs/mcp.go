package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"avfs/mcpserver"
	"avfs/runner"
	"avfs/vault"
	"avfs/wire"
)

// mcpTokenEnv names the bearer token of `avfs mcp --listen`: kept out of
// the command line, which other users can read.
const mcpTokenEnv = "AVFS_MCP_TOKEN"

func mcpCommand(e *env) *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "listen", Usage: "serve Streamable HTTP on `ADDR` (host:port; loopback unless $" + mcpTokenEnv + " sets a bearer token) instead of stdio"},
		&cli.StringFlag{Name: "signing-key", Usage: "sign grants the user gives through elicitation with the Ed25519 private key in `FILE` (default $AVFS_APPROVER_SIGNING_KEY)"},
	}
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve the exec, checkpoint and approval tools over the Model Context Protocol",
		UsageText: "avfs mcp [--listen ADDR] [--bundle DIR]…\n\n" +
			"Speaks MCP on stdin and stdout (or Streamable HTTP with --listen); see docs/mcp.md.\n" +
			"Each exec call runs what avfs proxy exec runs, with the same config and policy.\n\n" +
			"example: claude mcp add avfs -- avfs mcp",
		Flags: append(flags, bundleFlags()...),
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			e.printed = true // stdout is the protocol's: errors go to stderr
			cfg, err := loadConfig(e.home)
			if err != nil {
				return err
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			srv := mcpserver.New(mcpserver.Config{
				Store: store, Vault: e.vaultName(), Version: version,
				NewRunner:  func(context.Context) (*runner.Runner, error) { return e.proxyRunner(c) },
				GrantProof: func() (func(vault.Approval) (string, error), error) { return grantProof(c, cfg) },
				Forward:    e.forwardToWorkspace,
				Restore:    e.restore,
				Settle:     e.settle,
			})
			if addr := c.String("listen"); addr != "" {
				return serveMCPHTTP(c.Context, e, srv, addr, os.Getenv(mcpTokenEnv))
			}
			// The session ends when the client closes stdin (the SDK then
			// cancels the calls in flight) or on SIGINT and SIGTERM: the
			// calls still running are cancelled with the signal as the
			// cause, and waited for, so that their commands end and clean up.
			drain := func(cause error) {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context), mcpShutdownWait)
				defer cancel()
				_ = srv.Drain(dctx, cause)
			}
			stop := context.AfterFunc(c.Context, func() { drain(context.Cause(c.Context)) })
			defer stop()
			err = srv.Run(c.Context, &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}})
			drain(errors.New("the MCP session ended"))
			if err != nil && c.Context.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, io.EOF) {
				return wire.Errorf(wire.CodeInternal, "mcp: %w", err)
			}
			return nil
		},
	}
}

// serveMCPHTTP serves srv on addr until ctx ends (SIGINT, SIGTERM). Then
// the running calls are cancelled with the signal as the cause, so that it
// reaches their commands (as it does a proxy exec run), and the shutdown
// waits, up to mcpShutdownWait, for them to end and clean up.
func serveMCPHTTP(ctx context.Context, e *env, srv *mcpserver.Server, addr, token string) error {
	if err := mcpserver.CheckListen(addr, token); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "mcp: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: mcpserver.HTTPHandler(srv.Server, token), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(e.stderr, "avfs mcp: serving Streamable HTTP on http://%s/\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return wire.Errorf(wire.CodeHostIO, "mcp: serve: %w", err)
	case <-ctx.Done():
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpShutdownWait)
	defer cancel()
	_ = srv.Drain(dctx, context.Cause(ctx))
	// The answers to the drained calls get a moment to go out; clients'
	// event streams never go idle, so they are closed after it.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer scancel()
	if hs.Shutdown(sctx) != nil {
		_ = hs.Close()
	}
	return nil
}

// mcpShutdownWait is how long a shut-down HTTP server waits for its calls:
// their commands' kill grace and the clean-up after it.
const mcpShutdownWait = runner.DefaultKillGrace + 10*time.Second

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
