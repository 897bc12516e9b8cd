package nfs

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The masters' "other host": a UTS namespace whose hostname is "hostb",
// made once for the test binary and held by a sleeping process. Each
// master process enters it with nsenter: one exec, where unshare, sh and
// hostname per process were three (about 0.17 s in the NFS guest, whose
// conformance pass starts one master process per scenario).
var (
	hostBOnce   sync.Once
	hostBHolder *exec.Cmd
	hostBGone   chan struct{} // closed when the holder has exited
	hostBErr    error
)

// onHostBPrefix returns the command prefix that runs a process on "hostb".
func onHostBPrefix(t *testing.T) []string {
	t.Helper()
	hostBOnce.Do(func() {
		c := exec.Command("unshare", "--uts", "sh", "-c", "hostname hostb && exec sleep 86400")
		var stderr strings.Builder
		c.Stderr = &stderr
		if hostBErr = c.Start(); hostBErr != nil {
			return
		}
		hostBHolder, hostBGone = c, make(chan struct{})
		go func() { _ = c.Wait(); close(hostBGone) }()
		// The namespace is ready once the holder is the sleep (after
		// hostname has set the name).
		comm := fmt.Sprintf("/proc/%d/comm", c.Process.Pid)
		for deadline := time.Now().Add(longWait); ; time.Sleep(10 * time.Millisecond) {
			select {
			case <-hostBGone:
				hostBErr = fmt.Errorf("the hostb namespace holder exited: %s", stderr.String())
				return
			default:
			}
			if b, err := os.ReadFile(comm); err == nil && strings.TrimSpace(string(b)) == "sleep" {
				return
			}
			if time.Now().After(deadline) {
				hostBErr = fmt.Errorf("the hostb namespace holder did not start within %v", longWait)
				return
			}
		}
	})
	if hostBErr != nil {
		t.Fatal(hostBErr)
	}
	return []string{"nsenter", "--uts=/proc/" + strconv.Itoa(hostBHolder.Process.Pid) + "/ns/uts", "--"}
}

// stopHostB ends the namespace's holder, if one was started.
func stopHostB() {
	if hostBHolder != nil {
		_ = hostBHolder.Process.Kill()
		<-hostBGone
	}
}
