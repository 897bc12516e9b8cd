package bench

import (
	"fmt"
	"os/exec"
	"time"

	"github.com/skillpilot/skillpilot/test/bench/refloop"
)

// ptyTool is tclsh on a PTY with echo off, for the reference loops.
type ptyTool struct{ *refloop.PTYTool }

func startPTYTool() (*ptyTool, error) {
	t, err := refloop.StartPTYTool()
	if err != nil {
		return nil, err
	}
	return &ptyTool{t}, nil
}

func (p *ptyTool) run(line string, marker []byte) (int, error) {
	n, _, err := p.Run(line, marker, false)
	return n, err
}

func (p *ptyTool) close() { p.Close() }

// ptyFloor measures one `puts hi` plus a marker on a bare PTY.
func ptyFloor(p *ptyTool, i int) (time.Duration, error) {
	t0 := time.Now()
	_, err := p.run(fmt.Sprintf("puts hi; puts MK%d\n", i), []byte(fmt.Sprintf("MK%d\r", i)))
	return time.Since(t0), err
}

// oneShot measures exec'ing a fresh tclsh for one command.
func oneShot(script string) (time.Duration, error) {
	t0 := time.Now()
	err := exec.Command("tclsh", script).Run()
	return time.Since(t0), err
}

type minimalLoop struct{ *refloop.MinimalLoop }

func startMinimalLoop(dir string, sync bool) (*minimalLoop, error) {
	m, err := refloop.StartMinimalLoop(dir, sync)
	if err != nil {
		return nil, err
	}
	return &minimalLoop{m}, nil
}

func (m *minimalLoop) close() { m.Close() }
