package report_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/internal/testenv/browser"
	"github.com/skillpilot/skillpilot/review"
	"github.com/skillpilot/skillpilot/review/internal/sessiontest"
	"github.com/skillpilot/skillpilot/review/report"
)

// artifactDir is where the browser tests leave their pages and screenshots
// for people (CI keeps it): $SP_ARTIFACT_DIR/report, by default
// artifacts/report at the top of the repository.
func artifactDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("SP_ARTIFACT_DIR")
	if base == "" {
		base = filepath.Join("..", "..", "artifacts")
	}
	dir, err := filepath.Abs(filepath.Join(base, "report"))
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// openPage loads the HTML file in headless chromium and checks what every
// page must satisfy: it loads, its script ran, no console error or uncaught
// exception, and no request leaves the machine.
func openPage(t *testing.T, path string) *browser.Browser {
	t.Helper()
	chromium := testenv.NeedTool(t, "chromium", "chromium")
	b, err := browser.Start(chromium, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Load("file://" + path); err != nil {
		t.Fatal(err)
	}
	var ready string
	if err := b.Eval(`document.body.dataset.ready || ""`, &ready); err != nil {
		t.Fatal(err)
	}
	if ready != "1" {
		t.Errorf("the page's script did not finish (data-ready=%q)", ready)
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("console errors or exceptions:\n%s", strings.Join(p, "\n"))
	}
	for _, u := range b.Requests() {
		if browser.External(u) {
			t.Errorf("the page requested %s: it must not need the network", u)
		}
	}
	return b
}

// TestBrowserRealSession10k records a real session of 10,000 commands on
// tclsh with tool restarts, cancels, a timeout, a runner crash and a lease
// expiry, renders its report and loads it in headless chromium: no console
// errors, one bar per command, hover and click show a command's details,
// and a screenshot is left in the artifact directory.
func TestBrowserRealSession10k(t *testing.T) {
	if testing.Short() {
		t.Skip("records 10,000 commands; not in -short")
	}
	dir := filepath.Join(t.TempDir(), "flow10k")
	cmds := sessiontest.BusyFlow(t, dir, 10000)
	s, err := review.Load(dir, review.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Commands) != len(cmds) {
		t.Fatalf("loaded %d commands, submitted %d", len(s.Commands), len(cmds))
	}
	m := report.Build([]*review.Session{s}, report.Options{})
	if m.Aggregated {
		t.Fatalf("10,000 commands were aggregated (max bars %d)", m.MaxBars)
	}
	for _, st := range []string{review.StatusOK, review.StatusError, review.StatusTimeout, review.StatusCancelled, review.StatusRunnerRestarted} {
		if m.Summary.ByStatus[st] == 0 {
			t.Errorf("the flow produced no %s command: %v", st, m.Summary.ByStatus)
		}
	}
	for _, c := range m.Lanes[0].Commands {
		// Settled by the next runner: drawn from its cmd_begin, with the
		// dead runner's time apart, not as a bar at the recovery. (Its run
		// itself may round to 0 ms: the runner is killed as soon as the
		// command has printed.)
		if c.Status == review.StatusRunnerRestarted && (c.DeadUntil == nil || c.DeadMS <= 0) {
			t.Errorf("the runner_restarted command %s is not drawn from its cmd_begin with the dead time apart: run %dms, dead until %v", c.CmdID, c.RunMS, c.DeadUntil)
		}
	}
	kinds := map[string]int{}
	for _, mk := range m.Lanes[0].Marks {
		kinds[mk.Kind]++
	}
	for _, k := range []string{review.MarkToolRestart, review.MarkRunnerRestart, review.MarkCancel, review.MarkStop, review.MarkLeaseExpired} {
		if kinds[k] == 0 {
			t.Errorf("no %s mark: %v", k, kinds)
		}
	}
	var page bytes.Buffer
	start := time.Now()
	if err := report.WriteHTML(&page, m); err != nil {
		t.Fatal(err)
	}
	t.Logf("10,000 commands: page %d bytes, written in %s", page.Len(), time.Since(start))
	out := artifactDir(t)
	path := filepath.Join(out, "timeline-10k.html")
	if err := os.WriteFile(path, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	b := openPage(t, path)
	var bars int
	if err := b.Eval(`document.querySelectorAll("#timeline rect.b").length`, &bars); err != nil {
		t.Fatal(err)
	}
	if bars != len(cmds) {
		t.Errorf("the page draws %d bars for %d commands", bars, len(cmds))
	}
	// Hover and click the bar of a cancelled command: the tooltip and the
	// details panel name it.
	var cancelled string
	for _, c := range m.Lanes[0].Commands {
		if c.Status == review.StatusCancelled {
			cancelled = c.CmdID
			break
		}
	}
	var tipText, detailText string
	err = b.Eval(`(function(){
		var rows = JSON.parse(document.getElementById("data").textContent).lanes[0].c, i;
		for (i = 0; i < rows.length && rows[i][0] !== `+jsString(cancelled)+`; i++) {}
		var el = document.querySelector('#timeline rect.b[data-i="' + i + '"]');
		var r = el.getBoundingClientRect();
		el.dispatchEvent(new MouseEvent("mousemove", {bubbles: true, clientX: r.x + 1, clientY: r.y + 1}));
		return document.getElementById("tip").textContent;
	})()`, &tipText)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Eval(`(function(){
		var el = document.querySelector("#timeline rect.b");
		el.dispatchEvent(new MouseEvent("click", {bubbles: true}));
		return document.getElementById("details").textContent;
	})()`, &detailText); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tipText, cancelled) || !strings.Contains(tipText, "cancelled") || !strings.Contains(tipText, "run:") {
		t.Errorf("hovering the cancelled command's bar shows %q", tipText)
	}
	if !strings.Contains(detailText, m.Lanes[0].Commands[0].CmdID) {
		t.Errorf("clicking the first bar shows %q, want its cmd_id %s", detailText, m.Lanes[0].Commands[0].CmdID)
	}
	// The first row of "ten longest" points at its bar; + zooms in.
	var rowText, zoom string
	if err := b.Eval(`(function(){
		document.querySelector("table.longest tr[data-l]").click();
		return document.getElementById("details").textContent;
	})()`, &rowText); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rowText, m.Summary.Longest[0].CmdID) {
		t.Errorf("clicking the longest command's row shows %q, want %s", rowText, m.Summary.Longest[0].CmdID)
	}
	if err := b.Eval(`document.getElementById("zoomin").click(), document.getElementById("timeline").style.width`, &zoom); err != nil {
		t.Fatal(err)
	}
	if zoom != "200%" {
		t.Errorf("after +, the timeline is %q wide", zoom)
	}
	b.Eval(`document.getElementById("zoomreset").click(), 0`, new(int))
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("console errors after hover and click:\n%s", strings.Join(p, "\n"))
	}
	b.Eval(`document.getElementById("details").textContent = "Click a bar for its details."; document.getElementById("tip").style.display = "none"; 0`, new(int))
	png, err := b.Screenshot(1400, 3000)
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(out, "timeline-10k.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Errorf("%s is not a PNG", shot)
	}
	t.Logf("screenshot: %s", shot)
}

func jsString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(" ")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
