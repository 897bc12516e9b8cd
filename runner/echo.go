package runner

// What "exact output" means for typed input (PROTOCOL.md section 9.8): a
// command's output file holds what the tool printed. The runner's terminal
// does not echo (ECHO is off), so typed input is not output. When a
// payload turns the terminal's echo on (stty echo, a library that does),
// the terminal itself echoes what a send delivers; that echo, when it is
// the next thing in the output and byte for byte the delivered bytes (after
// the usual \r\n -> \n), is left out of the output file. log/session.out,
// the spool, keeps every byte. What a tool prints itself (a line editor's
// echo, a script printing what it read) is its output and stays.

// echoFilter holds back output that may be the terminal's echo of
// delivered input, and drops it once it is complete. It is owned by the
// owner goroutine.
type echoFilter struct {
	want []byte // the echo still expected, in order
	held []byte // output matching a prefix of want, not yet emitted
}

// expect adds delivered bytes whose echo is expected next.
func (e *echoFilter) expect(b []byte) { e.want = append(e.want, b...) }

// truncate forgets the last n expected bytes (a write that was cut short).
func (e *echoFilter) truncate(n int) {
	keep := max(len(e.want)-n, len(e.held))
	if keep < len(e.want) {
		e.want = e.want[:keep]
	}
	if len(e.want) == len(e.held) {
		e.reset()
	}
}

// feed passes output b through: the part that continues the expected echo
// is held back (and dropped once the echo is complete), the rest goes to
// emit. At the first byte that differs the filter gives up, emitting what
// it held.
func (e *echoFilter) feed(b []byte, emit func([]byte)) {
	if len(e.want) == 0 {
		emit(b)
		return
	}
	rest := e.want[len(e.held):]
	n := commonPrefix(b, rest)
	switch {
	case n == len(rest): // The echo is complete: dropped.
		e.reset()
		if n < len(b) {
			emit(b[n:])
		}
	case n == len(b): // All of b may be echo; wait for more.
		e.held = append(e.held, b...)
	default: // Not the echo after all.
		if len(e.held) > 0 {
			emit(e.held)
		}
		e.reset()
		emit(b)
	}
}

// flush emits what is held back (the command ended mid-echo).
func (e *echoFilter) flush(emit func([]byte)) {
	if len(e.held) > 0 {
		emit(e.held)
	}
	e.reset()
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// outWindow keeps the last bytes of a command's output for expect: at
// least expectWindow of them, at most twice that.
// reset forgets the expected echo and what was held of it.
func (e *echoFilter) reset() { e.want, e.held = e.want[:0], e.held[:0] }

type outWindow struct {
	buf []byte
	end int64 // output offset just past buf
}

func (w *outWindow) add(b []byte) {
	w.end += int64(len(b))
	if len(b) >= expectWindow {
		w.buf = append(w.buf[:0], b[len(b)-expectWindow:]...)
		return
	}
	if len(w.buf)+len(b) > 2*expectWindow {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-(expectWindow-len(b)):]...)
	}
	w.buf = append(w.buf, b...)
}

// start is the output offset of the first byte kept.
func (w *outWindow) start() int64 { return w.end - int64(len(w.buf)) }

// since returns the kept output from offset from (start() <= from <= end).
func (w *outWindow) since(from int64) []byte { return w.buf[from-w.start():] }
