// Command hello is a Go hello-world, built like the project's binaries
// (static, no cgo): the floor the benchmarks hold a Go program's start to
// (BenchmarkCLIStart).
package main

import "fmt"

func main() { fmt.Println("hello, world") }
