package runner

import (
	"sync"
	"syscall"
)

// toolTerm is one running tool process as the runner sees it: bytes out,
// bytes in, signals, the window size, and its end. The PTY implementation
// (ptyTerm) is what runs in production; tests use a pipe-based fake that
// plays a tool's part, so that the runner's governance of the tool
// (timeouts, Ctrl-C and resynchronisation, kill escalation, crash-loop
// backoff, restart limits, init failures) is tested without a terminal and
// without real time.
//
// Output and Exited are independent: a tool can exit while something it
// started still holds its terminal (Output stays open), and output written
// right before the exit can arrive after Exited. Close ends both the
// terminal and the reading; it does not kill anything.
type toolTerm interface {
	// Output delivers the tool's output. The channel is closed at end of
	// stream (the terminal's last holder is gone) or after Close. The
	// receiver returns each chunk's buffer with chunk.release.
	Output() <-chan chunk
	// Write types as much of p as the terminal takes now, without
	// waiting, and returns how much that was (the typist writes the rest:
	// typist.go). It must not be called while an Input is under way.
	Write(p []byte) (int, error)
	// PendingInput is how many typed bytes the tool has not read yet (the
	// terminal's input queue).
	PendingInput() (int, error)
	// Activity reports what the terminal's foreground process group is
	// doing: whether the main thread of one of its processes runs, and the
	// CPU time those threads used (groupActivity).
	Activity() (fgActivity, error)
	// FlushInput drops what was typed and the tool has not read yet.
	FlushInput() error
	// Input writes p into the terminal as typed input, blocking until the
	// terminal has taken all of it (it takes input only as fast as the
	// tool reads) or abort is closed. It returns how many bytes it took.
	Input(p []byte, abort <-chan struct{}) (int, error)
	// Echo reports whether the terminal echoes input (termios ECHO).
	Echo() (bool, error)
	// RestoreModes puts back the terminal modes the runner set at start
	// (no echo, no output post-processing) when something in the tool
	// changed them (`stty sane`, a pager), and names what it turned off;
	// "" when nothing had changed.
	RestoreModes() (string, error)
	// SignalForeground sends sig to the terminal's foreground process
	// group only: what a key such as Ctrl-\ does, without any cancel.
	SignalForeground(sig syscall.Signal) error
	// Interrupt does what a user's Ctrl-C does.
	Interrupt() error
	// Signal sends sig to the tool's process group, and to the terminal's
	// foreground process group when that is another one (a job the tool
	// started).
	Signal(sig syscall.Signal) error
	// Resize sets the terminal's window size.
	Resize(cols, rows int) error
	// Exited receives one value once the tool process has ended and been
	// reaped.
	Exited() <-chan toolExit
	// Close releases the terminal and stops the reader. Safe to call more
	// than once.
	Close() error
	// Pid is the tool's process id (also its process group and session).
	Pid() int
	// StartTime identifies the process together with Pid: its start time
	// in clock ticks since boot (/proc/PID/stat field 22), 0 if unknown.
	StartTime() uint64
}

// termSpec is what starting a tool needs.
type termSpec struct {
	Argv       []string
	Env        []string
	Dir        string
	Cols, Rows int
}

// termStarter starts a tool on its terminal.
type termStarter func(termSpec) (toolTerm, error)

// Default window size: wide, because EDA reports wrap or truncate at the
// width (80 columns cuts most of them).
const (
	defaultCols = 512
	defaultRows = 50
)

// chunkSize is the read size. Linux PTYs hand out at most 4 KiB per read in
// practice; a larger buffer costs nothing and helps when they do more.
const chunkSize = 32 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// chunk is bytes read from a tool.
type chunk struct {
	buf *[]byte
	n   int
}

// release returns the buffer to the pool.
func (c chunk) release() { chunkPool.Put(c.buf) }

// newChunk copies b into a pooled buffer (for terminals that do not read
// into one themselves).
func newChunk(b []byte) chunk {
	buf := chunkPool.Get().(*[]byte)
	if len(*buf) < len(b) {
		nb := make([]byte, len(b))
		buf = &nb
	}
	return chunk{buf: buf, n: copy(*buf, b)}
}

// toolExit is how a tool process ended.
type toolExit struct {
	code   *int   // exit code, when it exited
	signal string // signal name (SIGKILL), when a signal killed it
	err    error  // waiting failed
}
