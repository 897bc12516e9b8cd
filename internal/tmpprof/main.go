package main

import (
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/skillpilot/skillpilot/cmd/master/cli"
)

func main() {
	runtime.MemProfileRate = 1
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	rc := cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	runtime.ReadMemStats(&ms1)
	println("alloc bytes", ms1.TotalAlloc-ms0.TotalAlloc, "mallocs", ms1.Mallocs-ms0.Mallocs, "numgc", ms1.NumGC, "heapsys", ms1.HeapSys)
	f, _ := os.Create("/tmp/mem.prof")
	pprof.Lookup("allocs").WriteTo(f, 0)
	f.Close()
	os.Exit(rc)
}
