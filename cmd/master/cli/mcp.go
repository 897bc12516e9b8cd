package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/master"
)

// MCPEnv names the master-mcp binary `master mcp` runs, when it is not
// beside the master binary or on $PATH.
const MCPEnv = "SP_MASTER_MCP"

// mcpUsage is the help line of `master mcp` (mcpserver.Usage: a test keeps
// the two equal; this package does not import mcpserver, see mcp).
const mcpUsage = `--session DIR | --pool DIR [--read-only] [--allow RE]... [--deny RE]... [--preview-bytes N] [--max-read N] [--max-wait D] [--default-wait D]
          serve the session (or a pool of sessions) to AI agents: a Model Context Protocol server on stdin/stdout`

// mcp is master mcp: the master-mcp binary's exit code (mcpServer), even
// when interrupted.
func (c *cli) mcp(ctx context.Context, args []string) error {
	return exitOnly(mcpServer(ctx, args, c.stdin, c.stdout.w, c.stderr))
}

// mcpServer runs `master mcp ARGS`: the master-mcp binary with ARGS, on this
// process's stdin, stdout and stderr, and returns its exit code. The MCP
// server lives in its own binary so that every other command starts
// without initialising the MCP SDK (master --version went from
// about 3.5 ms to 1.5 ms). An interrupt is passed on as SIGTERM; the
// server ends its calls and exits.
func mcpServer(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	path, err := mcpBinary()
	if err != nil {
		fmt.Fprintf(stderr, "master mcp: %v\n", err)
		return master.ExitIO // An installation's fault, not a command's failure.
	}
	return runBinary(ctx, path, args, stdin, stdout, stderr)
}

// runBinary runs the program at path with args on the streams given and
// returns its exit code (128 + N when signal N ended it). An interrupt is
// passed on as SIGTERM.
func runBinary(ctx context.Context, path string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return master.ExitOK
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
	}
	fmt.Fprintf(stderr, "master: %s: %v\n", path, err)
	return master.ExitFailed
}

// mcpBinary finds master-mcp: $SP_MASTER_MCP, else beside this
// executable (make build and go install put them together), else $PATH.
func mcpBinary() (string, error) {
	if p := os.Getenv(MCPEnv); p != "" {
		return envMCPBinary(p)
	}
	return siblingBinary("master-mcp", MCPEnv, "the MCP server is the master-mcp binary, installed beside master")
}

// siblingBinary finds the program name: $env, else beside this executable
// (make build and go install put them together), else $PATH; what says
// what it is, for the error.
func siblingBinary(name, env, what string) (string, error) {
	if p := os.Getenv(env); p != "" && env != MCPEnv {
		return exec.LookPath(p)
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", errors.New(what + " (make build, or go install ./cmd/...); it is neither beside this master nor on $PATH (or set " + env + ")")
}

// envMCPBinary checks $SP_MASTER_MCP (p): it must name an executable that
// is not this master (master run as its own MCP server took
// "--session DIR" for a command and said "no command given"). Every error
// names the variable.
func envMCPBinary(p string) (string, error) {
	path, err := exec.LookPath(p)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w; point it at the master-mcp binary, or unset it", MCPEnv, p, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w", MCPEnv, p, err)
	}
	if self, err := os.Executable(); err == nil {
		if sfi, err := os.Stat(self); err == nil && os.SameFile(fi, sfi) {
			return "", fmt.Errorf("%s=%s names this master itself, not the MCP server; point it at the master-mcp binary, or unset it", MCPEnv, p)
		}
	}
	return path, nil
}
