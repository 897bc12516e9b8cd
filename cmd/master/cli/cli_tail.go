package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// tailLines is how many lines tail -f starts with, as tail(1).
const tailLines = 10

func tailFlags(cmd *command) runFunc {
	follow := cmd.Bool("f", false, "keep printing new output until interrupted")
	from := cmd.Int64("from", 0, "byte cursor to start at (negative: that many bytes before the end)")
	fromStart := cmd.Bool("from-start", false, "with -f, start at the first byte instead of the last lines")
	clean := cmd.Bool("clean", false, "only the commands' own output (no prompt, echo, init output or markers)")
	lines := cmd.Int("n", 0, "start with the spool's last N lines, as tail -n N (without -f: print them and exit)")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if len(pos) > 0 {
			return usageErr("tail takes no arguments")
		}
		fromSet, linesSet := false, false
		cmd.Visit(func(f *flag.Flag) {
			fromSet = fromSet || f.Name == "from"
			linesSet = linesSet || f.Name == "n"
		})
		if fromSet && *fromStart {
			return usageErr("give --from or --from-start, not both")
		}
		if linesSet && (fromSet || *fromStart) {
			return usageErr("give -n, --from or --from-start, not two of them")
		}
		if linesSet && *lines < 0 {
			return usageErr("-n %d: a count of lines is 0 or more", *lines)
		}
		if linesSet && *clean {
			return usageErr("-n counts the spool's raw lines; --clean -f starts with the last command's output")
		}
		s, err := cmd.open()
		if err != nil {
			return err
		}
		switch {
		case linesSet && *lines == 0:
			*from, _ = s.SpoolSize()
		case linesSet:
			*from = lastLinesOffset(filepath.Join(s.Dir(), protocol.FileSpool), *lines)
		case *from < 0:
			size, _ := s.SpoolSize()
			*from = max(size+*from, 0)
		case *follow && !fromSet && !*fromStart && *clean:
			*from = lastCmdBegin(filepath.Join(s.Dir(), protocol.FileMeta))
		case *follow && !fromSet && !*fromStart:
			*from = lastLinesOffset(filepath.Join(s.Dir(), protocol.FileSpool), tailLines)
		}
		var w io.Writer = c.stdout
		var jl *jsonLines
		if c.json {
			jl = &jsonLines{c: c, off: *from, offsets: !*clean}
			w = jl
		}
		var cw *cleanWriter
		if *clean {
			cw = &cleanWriter{w: w, pos: *from, ends: &cmdEnds{path: filepath.Join(s.Dir(), protocol.FileMeta)}}
			w = cw
		}
		cur, err := s.Tail(ctx, w, *from, *follow)
		if jl != nil {
			jl.flush()
			c.printJSONLine(map[string]any{"protocol_version": protocol.Version, "resume_cursor": cur})
		} else {
			c.diag("resume_cursor %d", cur)
		}
		return err
	}
}

// jsonLines turns a byte stream into JSON Lines, one per write, never
// splitting a UTF-8 sequence between two lines.
type jsonLines struct {
	c       *cli
	off     int64
	held    []byte
	offsets bool
}

func (j *jsonLines) Write(b []byte) (int, error) {
	data := append(j.held, b...)
	cut := len(data)
	// Hold back an incomplete UTF-8 sequence at the end (at most 3 bytes).
	for k := 1; k <= 3 && k <= len(data); k++ {
		if r := data[len(data)-k]; r >= 0xC0 {
			if !utf8.FullRune(data[len(data)-k:]) {
				cut = len(data) - k
			}
			break
		} else if r < 0x80 {
			break
		}
	}
	j.held = append([]byte(nil), data[cut:]...)
	j.emit(data[:cut])
	return len(b), nil
}

func (j *jsonLines) flush() {
	j.emit(j.held)
	j.held = nil
}

func (j *jsonLines) emit(b []byte) {
	if len(b) == 0 {
		return
	}
	doc := textDoc(b)
	if j.offsets {
		doc["offset"] = j.off
	}
	j.off += int64(len(b))
	j.c.printJSONLine(doc)
}

func waitforFlags(cmd *command) runFunc {
	from := cmd.Int64("from", 0, "byte cursor to start at")
	var timeout time.Duration
	cmd.Duration(&timeout, "wait-timeout", 0, "how long to wait (0: forever); exit 3 when exceeded")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if len(pos) != 1 {
			return usageErr("one REGEXP expected")
		}
		re, err := regexp.Compile(pos[0])
		if err != nil {
			return usageErr("%v", err)
		}
		s, err := cmd.open()
		if err != nil {
			return err
		}
		ctx, cancel := withTimeout(ctx, timeout)
		defer cancel()
		m, err := s.WaitFor(ctx, re, *from)
		if c.json {
			doc, jerr := matchDoc(m)
			if jerr != nil {
				return jerr
			}
			if err != nil {
				code, _ := master.Classify(err)
				doc["error"] = errorJSON(code, err)
				c.json = false // One document: the error is in it.
			}
			c.printJSON(doc)
		} else if err == nil {
			fmt.Fprintf(c.stdout, "%d %s\n", m.ResumeCursor, strings.TrimSpace(m.Text))
		} else {
			c.diag("resume_cursor %d", m.ResumeCursor)
		}
		return err
	}
}

// matchDoc is the --json document of a waitfor: the master library's one
// waitfor reply shape (master.Match: document 000's names, no match fields
// without a match) with protocol_version.
func matchDoc(m master.Match) (map[string]any, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	doc["protocol_version"] = protocol.Version
	return doc, nil
}
