// Package browser drives Debian's headless chromium through the Chrome
// DevTools Protocol over --remote-debugging-pipe, for the report's browser
// test: load a page, collect console errors, uncaught exceptions and network
// requests, evaluate an expression, take a screenshot. It needs no library:
// the pipe carries NUL-terminated JSON messages on file descriptors 3 and 4.
// It is test support, part of internal/testenv (find chromium with
// testenv.NeedTool).
package browser

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Flags are the chromium flags known to work on this project's machines
// (no network, no background services), plus the pipe.
var Flags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--remote-debugging-pipe", "--hide-scrollbars", "--mute-audio"}

// callTimeout bounds each protocol call: an anti-hang guard.
const callTimeout = 90 * time.Second

// Browser is one chromium process with one page.
type Browser struct {
	cmd     *exec.Cmd
	in      *os.File // our end: commands to chromium (its fd 3)
	out     *os.File // our end: replies and events (its fd 4)
	profile string
	session string // the page's CDP session id

	mu       sync.Mutex
	nextID   int
	waiting  map[int]chan reply
	problems []string // console errors and uncaught exceptions
	requests []string // URLs the page requested
	loaded   chan struct{}
	dead     chan struct{}
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type message struct {
	ID        int             `json:"id"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	SessionID string          `json:"sessionId"`
	reply
}

// Start launches chromium (path) with a fresh profile directory and opens
// one page with console, exception and network reporting on.
func Start(path, profile string) (*Browser, error) {
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	args := append(append([]string(nil), Flags...), "--user-data-dir="+profile, "about:blank")
	cmd := exec.Command(path, args...)
	cmd.ExtraFiles = []*os.File{cmdR, evW}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	cmdR.Close()
	evW.Close()
	b := &Browser{cmd: cmd, in: cmdW, out: evR, profile: profile, waiting: map[int]chan reply{},
		loaded: make(chan struct{}, 1), dead: make(chan struct{})}
	go b.read()
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		b.Close()
		return nil, err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		b.Close()
		return nil, err
	}
	b.session = att.SessionID
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable", "Network.enable"} {
		if err := b.call(b.session, m, map[string]any{}, nil); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// read dispatches replies to their callers and records events.
func (b *Browser) read() {
	defer close(b.dead)
	r := bufio.NewReaderSize(b.out, 1<<20)
	for {
		raw, err := r.ReadBytes(0)
		if err != nil {
			return
		}
		var m message
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.waiting[m.ID]
			delete(b.waiting, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m.reply
			}
			continue
		}
		b.event(m)
	}
}

func (b *Browser) event(m message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch m.Method {
	case "Page.loadEventFired":
		select {
		case b.loaded <- struct{}{}:
		default:
		}
	case "Runtime.exceptionThrown":
		b.problems = append(b.problems, "exception: "+string(m.Params))
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Type == "error" || p.Type == "assert" {
			b.problems = append(b.problems, "console."+p.Type+": "+string(m.Params))
		}
	case "Log.entryAdded":
		var p struct {
			Entry struct {
				Level string `json:"level"`
			} `json:"entry"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Entry.Level == "error" {
			b.problems = append(b.problems, "log: "+string(m.Params))
		}
	case "Network.requestWillBeSent":
		var p struct {
			Request struct {
				URL string `json:"url"`
			} `json:"request"`
		}
		_ = json.Unmarshal(m.Params, &p)
		b.requests = append(b.requests, p.Request.URL)
	}
}

// call sends one command and decodes its result into out (if not nil).
func (b *Browser) call(session, method string, params any, out any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan reply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.in.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case rep := <-ch:
		if rep.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, rep.Error.Message, rep.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(rep.Result, out)
		}
		return nil
	case <-b.dead:
		return fmt.Errorf("%s: chromium exited", method)
	case <-time.After(callTimeout):
		return fmt.Errorf("%s: no reply within %s", method, callTimeout)
	}
}

// Load navigates to url and waits for its load event.
func (b *Browser) Load(url string) error {
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.call(b.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return errors.New("navigate: " + nav.ErrorText)
	}
	select {
	case <-b.loaded:
		return nil
	case <-b.dead:
		return errors.New("chromium exited while loading")
	case <-time.After(callTimeout):
		return errors.New("the page did not finish loading")
	}
}

// Eval evaluates a JavaScript expression in the page and decodes its value.
func (b *Browser) Eval(expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails json.RawMessage `json:"exceptionDetails"`
	}
	if err := b.call(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res); err != nil {
		return err
	}
	if len(res.ExceptionDetails) > 0 {
		return fmt.Errorf("evaluate %q: %s", expr, res.ExceptionDetails)
	}
	return json.Unmarshal(res.Result.Value, out)
}

// Screenshot renders the whole page at width CSS pixels (up to maxHeight
// tall) and returns the PNG.
func (b *Browser) Screenshot(width, maxHeight int) ([]byte, error) {
	var h int
	if err := b.Eval("Math.ceil(document.documentElement.scrollHeight)", &h); err != nil {
		return nil, err
	}
	h = min(max(h, 100), maxHeight)
	if err := b.call(b.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": h, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := b.call(b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(shot.Data)
}

// Problems returns the console errors and uncaught exceptions seen so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// Requests returns the URLs the page requested (network or file).
func (b *Browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}

// Close ends chromium.
func (b *Browser) Close() {
	_ = b.call("", "Browser.close", map[string]any{}, nil)
	b.in.Close()
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
	b.out.Close()
}

// External reports whether url leaves the machine (anything but file:,
// data:, about: and blob:).
func External(url string) bool {
	for _, p := range []string{"file:", "data:", "about:", "blob:"} {
		if strings.HasPrefix(url, p) {
			return false
		}
	}
	return true
}
