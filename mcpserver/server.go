package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/master"
)

// Config configures the server. Zero values take the defaults below.
type Config struct {
	Session string // one session directory (exclusive with Pool)
	Pool    string // a directory whose subdirectories are sessions

	PreviewBytes int           // inline output per call: head+tail bytes (4096)
	MaxRead      int           // largest range read_output and tail return (65536)
	MaxWait      time.Duration // ceiling on how long one call may block (10m)
	DefaultWait  time.Duration // how long a call blocks when it names no wait_timeout_s (60s)

	Allow    []*regexp.Regexp // if any: a payload must match one of them
	Deny     []*regexp.Regexp // a payload matching any of them is refused
	ReadOnly bool             // only the tools that change nothing (see toolDefs)

	Logger *slog.Logger // one line per call; nil: discard
}

// Defaults of Config.
const (
	DefaultPreviewBytes = 4096
	DefaultMaxRead      = 64 << 10
	DefaultMaxWait      = 10 * time.Minute
	DefaultDefaultWait  = 60 * time.Second
)

func (c Config) withDefaults() (Config, error) {
	if (c.Session == "") == (c.Pool == "") {
		return c, errors.New("give exactly one of --session DIR and --pool DIR")
	}
	if c.PreviewBytes <= 0 {
		c.PreviewBytes = DefaultPreviewBytes
	}
	if c.PreviewBytes < 16 {
		return c, fmt.Errorf("preview budget %d bytes is too small (at least 16)", c.PreviewBytes)
	}
	if c.MaxRead <= 0 {
		c.MaxRead = DefaultMaxRead
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.DefaultWait <= 0 {
		c.DefaultWait = DefaultDefaultWait
	}
	c.DefaultWait = min(c.DefaultWait, c.MaxWait)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}

// handler holds what every tool call needs.
type handler struct {
	cfg      Config
	sessions *sessions
	owner    string // submitter prefix: mcp@host:pid

	mu    sync.Mutex
	cmds  map[string]cmdRef    // commands this server submitted, by cmd_id
	lines map[string]*heldLine // the unfinished line typed into a command, by session and cmd_id (tool_send.go)
}

type cmdRef struct {
	s       *master.Session
	session string
	cmd     *master.Command
}

// New returns an MCP server over the session(s) named by cfg, with the tools
// of toolDefs (the read-only ones only, with cfg.ReadOnly).
func New(cfg Config) (*mcp.Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ss, err := newSessions(cfg.Session, cfg.Pool)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	h := &handler{cfg: cfg, sessions: ss, owner: fmt.Sprintf("mcp@%s:%d", host, os.Getpid()), cmds: map[string]cmdRef{}, lines: map[string]*heldLine{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "skillpilot", Title: "SkillPilot session", Version: "1"},
		&mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{}})
	refused := map[string]bool{}
	var offered []string
	for _, d := range toolDefs {
		if cfg.ReadOnly && d.access != reads {
			refused[d.name] = true
			continue
		}
		offered = append(offered, d.name)
		d.add(srv, h)
	}
	if len(refused) > 0 {
		srv.AddReceivingMiddleware(refuse(refused, offered))
	}
	return srv, nil
}

const instructions = `This server drives one long-lived EDA tool session (a Tcl interpreter on a PTY) through SkillPilot.
Use run for a command and its result; submit and wait for long commands; outputs come back as a bounded
preview (head and tail) with size and sha256: fetch exact byte ranges with read_output. wait_for searches the
session's output spool from a cursor: always pass the resume_cursor of the previous call.`

// refuse answers calls to tools left out by --read-only with a clear tool
// error instead of "unknown tool".
func refuse(names map[string]bool, offered []string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && names[r.Params.Name] {
				res := &mcp.CallToolResult{}
				res.SetError(fmt.Errorf("refused: this server was started with --read-only and offers only %s, not %s",
					strings.Join(offered, ", "), r.Params.Name))
				return res, nil
			}
			return next(ctx, method, req)
		}
	}
}

// submitter names the caller in the command file (kept in archive/).
func (h *handler) submitter(req *mcp.CallToolRequest) string {
	if req != nil && req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
			name, _ := cut(p.ClientInfo.Name, 64)
			return h.owner + " client=" + name
		}
	}
	return h.owner
}

// callWait returns how long a call may block: the asked number of seconds
// (<= 0: the default), never more than the ceiling.
func (h *handler) callWait(seconds float64) time.Duration {
	if seconds <= 0 {
		return h.cfg.DefaultWait
	}
	return min(time.Duration(seconds*float64(time.Second)), h.cfg.MaxWait)
}

// checkPayload applies --allow and --deny.
func (h *handler) checkPayload(payload string) error {
	for _, re := range h.cfg.Deny {
		if re.MatchString(payload) {
			return fmt.Errorf("refused: the payload matches the server's --deny rule %q", re.String())
		}
	}
	if len(h.cfg.Allow) == 0 {
		return nil
	}
	for _, re := range h.cfg.Allow {
		if re.MatchString(payload) {
			return nil
		}
	}
	return fmt.Errorf("refused: the payload matches none of the server's --allow rules")
}

func (h *handler) remember(r cmdRef) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.cmds) > 10000 { // Bounded: forget all, lookups still work.
		clear(h.cmds)
	}
	h.cmds[r.cmd.ID] = r
}

// command finds a command by cmd_id: one this server submitted, or any
// command of the session(s).
func (h *handler) command(session, cmdID string) (cmdRef, error) {
	h.mu.Lock()
	r, ok := h.cmds[cmdID]
	h.mu.Unlock()
	if ok && (session == "" || session == r.session) {
		return r, nil
	}
	s, name, c, err := h.sessions.command(session, cmdID)
	if err != nil {
		return cmdRef{}, err
	}
	return cmdRef{s: s, session: name, cmd: c}, nil
}
