// Command minloop runs the benchmarks' minimal file queue loop
// (refloop.MinimalLoop) as a process of its own, so that it can be
// measured with nothing else alive. It serves --dir until SIGTERM, and
// creates DIR/ready once it watches queue/.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/skillpilot/skillpilot/test/bench/refloop"
)

func main() {
	dir := flag.String("dir", "", "queue directory to serve")
	sync := flag.Bool("sync", true, "fsync each result before its rename")
	flag.Parse()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	m, err := refloop.StartMinimalLoop(*dir, *sync)
	if err != nil {
		fmt.Fprintln(os.Stderr, "minloop:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(*dir, "ready"), nil, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "minloop:", err)
		os.Exit(1)
	}
	<-sigs
	m.Close()
}
