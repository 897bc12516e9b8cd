package mcpserver

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testrunner"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/master"
)

// longWait bounds every wait of these tests. It is a hang guard, not a
// timing assertion: a healthy run is far below it even on a slow machine.
const longWait = 90 * time.Second

func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), longWait)
	t.Cleanup(cancel)
	return c
}

// startRunner runs a runner (tclsh) in-process on dir until the test ends;
// then, once it has stopped, the session-invariant check runs on dir.
func startRunner(t testing.TB, dir string) {
	t.Helper()
	testrunner.StartChecked(t, dir, sessioncheck.Options{})
	if _, err := master.WaitReady(testCtx(t), dir, master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
}

// connect serves cfg over an in-memory transport and returns the client's
// session.
func connect(t testing.TB, cfg Config) *mcp.ClientSession {
	t.Helper()
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := testCtx(t)
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// newSession starts a runner on a new session and connects a server to it.
func newSession(t testing.TB, mods ...func(*Config)) (string, *mcp.ClientSession) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sess")
	startRunner(t, dir)
	cfg := Config{Session: dir}
	for _, m := range mods {
		m(&cfg)
	}
	return dir, connect(t, cfg)
}

// call calls a tool that must succeed and decodes its structured output
// into out (which may be nil).
func call(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, out any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, textOf(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %s: %v", name, b, err)
		}
	}
	return m
}

// callErr calls a tool that must fail with a tool error and returns its text.
func callErr(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v, want a tool error", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s: succeeded, want a tool error: %v", name, res.StructuredContent)
	}
	return textOf(res)
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// waitUntil polls cond until it holds (the test's deadline is the limit).
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
