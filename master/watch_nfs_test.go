package master

import (
	"context"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// On a network filesystem a wait polls adaptively: its doorbell rings at
// once and keeps ringing although PollInterval is an hour here (without
// the adaptive start it would first ring after an hour).
func TestNetworkWaitPollsAdaptively(t *testing.T) {
	s, _ := bareSession(t)
	defer s.Close()
	s.network = true
	s.PollInterval = time.Hour
	bell, stop := s.watch(context.Background(), protocol.DirResult)
	defer stop()
	for i := range 5 {
		select {
		case <-bell:
		case <-time.After(30 * time.Second):
			t.Fatalf("ring %d: a network wait did not poll before PollInterval", i)
		}
	}
}
