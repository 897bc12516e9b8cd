// Command minsub is the least a Go master can do for `submit --wait`:
// read seq/hint, reserve the next seq (O_EXCL), write the command file
// (temp + rename), rewrite the hint in place, wait on inotify for the
// result and print its inline output. No checks, no flags, no library:
// the floor BenchmarkCLIStart holds `master submit --wait` to, beside the
// one-shot tclsh (docs/benchmarks-log.md, "Issue 44, eighth pass"). Not
// a master: it trusts the session completely. Usage: minsub DIR PAYLOAD.
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: minsub DIR PAYLOAD")
		os.Exit(2)
	}
	dir, payload := os.Args[1], os.Args[2]
	h, _ := os.ReadFile(filepath.Join(dir, "seq", "hint"))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(h)), 10, 64)
	for n++; ; n++ {
		fd, err := unix.Open(filepath.Join(dir, "seq", fmt.Sprintf("%010d", n)), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o660)
		if err == nil {
			unix.Close(fd)
			break
		}
		if err != unix.EEXIST {
			fmt.Fprintln(os.Stderr, "minsub:", err)
			os.Exit(1)
		}
	}
	id := fmt.Sprintf("minsub-%d-%d", os.Getpid(), n)
	name := fmt.Sprintf("cmd_%010d_%s.json", n, id)
	b, _ := json.Marshal(map[string]any{"protocol_version": 1, "cmd_id": id, "seq": n, "kind": "tcl", "payload": payload})
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err == nil {
		_, err = unix.InotifyAddWatch(in, filepath.Join(dir, "result"), unix.IN_MOVED_TO|unix.IN_CREATE)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "minsub:", err)
		os.Exit(1)
	}
	tmp := filepath.Join(dir, "queue", "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o660); err != nil {
		fmt.Fprintln(os.Stderr, "minsub:", err)
		os.Exit(1)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "queue", name)); err != nil {
		fmt.Fprintln(os.Stderr, "minsub:", err)
		os.Exit(1)
	}
	if f, err := os.OpenFile(filepath.Join(dir, "seq", "hint"), os.O_WRONLY, 0); err == nil {
		fmt.Fprintf(f, "%-19d\n", n)
		f.Close()
	}
	res := filepath.Join(dir, "result", name)
	buf := make([]byte, 4096)
	for {
		if r, err := os.ReadFile(res); err == nil {
			var v struct {
				Out string `json:"output_inline"`
			}
			if err := json.Unmarshal(r, &v); err != nil {
				fmt.Fprintln(os.Stderr, "minsub:", err)
				os.Exit(1)
			}
			o, _ := base64.StdEncoding.DecodeString(v.Out)
			os.Stdout.Write(o)
			return
		}
		if _, err := unix.Read(in, buf); err != nil && err != unix.EINTR {
			fmt.Fprintln(os.Stderr, "minsub:", err)
			os.Exit(1)
		}
	}
}
