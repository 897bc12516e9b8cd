package master_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"regexp"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// A flow script runs a command and branches on its outcome.
func ExampleSession_Run() {
	s, err := master.Open(os.Getenv("SP_SESSION_DIR"))
	if err != nil {
		log.Fatal(err) // errors.Is(err, master.ErrSessionMissing)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	res, err := s.Run(ctx, "report_timing -max_paths 10", master.SubmitOptions{Timeout: 30 * time.Minute})
	if err != nil {
		log.Fatal(err) // master.ErrCommandFailed, ErrCommandTimeout, ErrCancelled, ErrWaitTimeout
	}
	fmt.Println(res.Status, res.OutputPath)
}

// Submit now, keep the runner's lease alive, and wait later.
func ExampleSession_KeepLease() {
	s, err := master.Open(os.Getenv("SP_SESSION_DIR"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop() // Ends the renewals: the runner stops once the lease runs out.
	go func() {
		for err := range s.KeepLease(ctx, 30*time.Second) {
			log.Printf("lease renewal failed: %v", err)
		}
	}()
	c, err := s.Submit(ctx, "place_design", master.SubmitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Wait(ctx, master.WaitOptions{}); err != nil {
		log.Fatal(err)
	}
}

// Wait for a line in the session's output, then resume from its cursor.
func ExampleSession_WaitFor() {
	s, err := master.Open(os.Getenv("SP_SESSION_DIR"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := s.WaitFor(ctx, regexp.MustCompile(`Design '\w+' loaded`), 0)
	if err != nil {
		log.Fatal(err) // master.ErrWaitTimeout: m.ResumeCursor is the spool size
	}
	fmt.Println(m.Text, "next search starts at", m.ResumeCursor)
}

// Cancel a command and branch on what the runner did.
func ExampleSession_Cancel() {
	s, err := master.Open(os.Getenv("SP_SESSION_DIR"))
	if err != nil {
		log.Fatal(err)
	}
	s.WaitForRunner = time.Minute // a runner restarting may take a while
	rep, err := s.Cancel(context.Background(), "place-1")
	switch {
	case err == nil:
		fmt.Println(rep.Outcome, rep.Message) // cancelled_running or cancelled_queued
	case errors.Is(err, master.ErrUnknownCmdID), errors.Is(err, master.ErrAlreadyFinished):
		fmt.Println("nothing to cancel:", err)
	case errors.Is(err, master.ErrRunnerNotAlive):
		fmt.Println("no runner: nothing was written")
	default:
		log.Fatal(err)
	}
}

// Wait for a runner being launched, then stop it: Stop writes the request,
// the PendingStop waits (Reply for the answer alone).
func ExampleSession_Stop() {
	dir := os.Getenv("SP_SESSION_DIR")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The scheduler may take a while to start it: allow a minute without
	// a live runner before giving up.
	if _, err := master.WaitReady(ctx, dir, master.WaitOptions{WaitForRunner: time.Minute}); err != nil {
		log.Fatal(err) // master.ErrRunnerNotAlive, ErrCannotServe, ErrWaitTimeout
	}
	s, err := master.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	p, err := s.Stop(ctx, protocol.StopGraceful)
	if errors.Is(err, master.ErrRunnerNotAlive) {
		fmt.Println("no runner: nothing was written")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	rep, err := p.Wait(ctx) // The reply, then the runner's end.
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Outcome) // accepted
}
