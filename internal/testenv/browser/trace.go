package browser

import (
	"encoding/json"
	"fmt"
)

// TraceThread is one thread of a Chrome trace as chromium's own trace
// engine (the one behind DevTools' Performance panel) parsed it: Entries
// is how many of its events the engine kept, Placed how many of them it
// placed in the thread's tree of slices, which is what the flame chart
// draws. A slice that overlaps another on its thread without nesting in
// it is kept but not placed: Placed < Entries means slices go undrawn.
type TraceThread struct {
	PID     int    `json:"pid"`
	TID     int    `json:"tid"`
	Process string `json:"process"`
	Entries int    `json:"entries"`
	Placed  int    `json:"placed"`
}

// traceApp is DevTools' stand-alone trace viewer, bundled in chromium:
// unlike chrome://tracing, it is there in headless mode.
const traceApp = "devtools://devtools/bundled/trace_app.html"

// ParseTrace loads DevTools' trace viewer and gives it data (a Chrome
// trace: an array of events or {"traceEvents": [...]}) the way a person
// opening the file in the Performance panel would; it returns every
// thread the engine found. The engine's module layout is chromium's own,
// not a stable API: an error here after a chromium upgrade means this
// function needs updating, not that the trace is wrong.
func (b *Browser) ParseTrace(data []byte) ([]TraceThread, error) {
	if err := b.Load(traceApp); err != nil {
		return nil, fmt.Errorf("load %s: %w", traceApp, err)
	}
	text, err := json.Marshal(string(data))
	if err != nil {
		return nil, err
	}
	script := `(async () => {
  const m = await import("./models/trace/trace.js");
  const t = JSON.parse(` + string(text) + `);
  const events = Array.isArray(t) ? t : t.traceEvents;
  const model = m.TraceModel.Model.createWithAllHandlers();
  await model.parse(events, {metadata: {}, isFreshRecording: false});
  const data = model.parsedTrace(0).data;
  const out = [];
  for (const [pid, p] of data.Renderer.processes) {
    for (const [tid, th] of p.threads) {
      let placed = 0;
      const walk = n => { placed++; for (const c of n.children) walk(c); };
      if (th.tree) for (const r of th.tree.roots) walk(r);
      out.push({pid: Number(pid), tid: Number(tid), process: String(p.name || ""), entries: th.entries.length, placed});
    }
  }
  return JSON.stringify(out);
})()`
	var res string
	if err := b.Eval(script, &res); err != nil {
		return nil, fmt.Errorf("chromium's trace engine: %w", err)
	}
	var threads []TraceThread
	if err := json.Unmarshal([]byte(res), &threads); err != nil {
		return nil, err
	}
	return threads, nil
}
