package runner

import "errors"

// typist types the runner's own lines (the start-up, a command's line, a
// fence, a sync) into the tool's terminal without ever making the owner
// goroutine wait. The terminal takes input only as fast as the tool reads
// it (a tool waiting for a licence reads nothing for minutes): what it
// takes at once is written at once (toolTerm.Write does not wait), and
// the rest, with whatever is typed after it, is written by a goroutine of
// its own, one write at a time, in order. A send's bytes (input.go) are
// written only while the typist is idle, so the two never interleave.
// Owned by the Run goroutine; one per tool process.
type typist struct {
	term    toolTerm
	backlog []byte      // typed after the write under way began
	w       *typedWrite // the write under way; nil when none
}

// typedWrite is bytes on their way into the terminal on the typist's
// goroutine.
type typedWrite struct {
	n     int // bytes handed to it
	abort chan struct{}
	done  chan inputDone
}

func newTypist(s toolTerm) *typist { return &typist{term: s} }

// typeBytes types p after everything typed before it. An error means the
// terminal is gone (the tool is dying).
func (t *typist) typeBytes(p []byte) error {
	if t.busy() {
		t.backlog = append(t.backlog, p...)
		return nil
	}
	n, err := t.term.Write(p)
	if err != nil {
		return err
	}
	if n < len(p) {
		t.start(append([]byte(nil), p[n:]...))
	}
	return nil
}

func (t *typist) start(p []byte) {
	w := &typedWrite{n: len(p), abort: make(chan struct{}), done: make(chan inputDone, 1)}
	t.w = w
	s := t.term
	go func() {
		n, err := s.Input(p, w.abort)
		w.done <- inputDone{n, err}
	}()
}

// busy reports whether typed bytes wait for the terminal.
func (t *typist) busy() bool { return t != nil && (t.w != nil || len(t.backlog) > 0) }

// done is where the write under way reports its end; nil when none is.
func (t *typist) done() <-chan inputDone {
	if t == nil || t.w == nil {
		return nil
	}
	return t.w.done
}

// errTypistCut is the error of a write the typist cut off (flush).
var errTypistCut = errors.New("runner: typed input dropped")

// finished takes the end of the write under way and starts the next one,
// if bytes were typed meanwhile. An error means the terminal is gone: what
// was still to type is dropped.
func (t *typist) finished(d inputDone) error {
	w := t.w
	t.w = nil
	if d.err != nil || d.n < w.n {
		t.backlog = nil
		if d.err == nil {
			d.err = errTypistCut
		}
		return d.err
	}
	if len(t.backlog) > 0 {
		p := t.backlog
		t.backlog = nil
		return t.typeBytes(p)
	}
	return nil
}

// flush drops what is still to type, cutting off the write under way; it
// returns how many bytes were dropped. The terminal's own queue (what was
// written and the tool has not read) is the session's: FlushInput.
func (t *typist) flush() int {
	if t == nil {
		return 0
	}
	dropped := len(t.backlog)
	t.backlog = nil
	if w := t.w; w != nil {
		close(w.abort)
		d := <-w.done // Bounded: the abort sets a write deadline in the past.
		dropped += w.n - d.n
		t.w = nil
	}
	return dropped
}
