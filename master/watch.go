package master

import (
	"context"
	"io"
	"log/slog"

	"github.com/skillpilot/skillpilot/fsq"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// watch returns a doorbell that rings when something changes in the
// session's directory rel (inotify, where it works) and at least every
// PollInterval (the only mechanism on network filesystems).
func (s *Session) watch(ctx context.Context, rel string) (<-chan struct{}, func()) {
	wctx, cancel := context.WithCancel(ctx)
	w := fsq.Watch(wctx, []string{s.path(rel)}, s.PollInterval, true, quiet)
	bell := make(chan struct{}, 1)
	ring := func() {
		select {
		case bell <- struct{}{}:
		default:
		}
	}
	go func() {
		for {
			select {
			case <-wctx.Done():
				return
			case <-w.Changes:
				ring()
			case <-w.Rescan:
				ring()
			}
		}
	}()
	return bell, func() { cancel(); <-w.Done() }
}
