package main

import (
	"archive/tar"
	"compress/gzip"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make install PREFIX=... puts both binaries, the Python and Tcl masters
// and the documents where README says; the installed master runs.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is required (apt-get install make)")
	}
	prefix := filepath.Join(t.TempDir(), "opt")
	out, err := exec.Command("make", "-C", "../..", "install", "PREFIX="+prefix, "BIN="+t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{"bin/runner", "bin/master", "share/skillpilot/python/skillpilot_master.py",
		"share/skillpilot/tcl/skillpilot_master.tcl", "share/doc/skillpilot/README.md", "share/doc/skillpilot/PROTOCOL.md"} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	v, err := exec.Command(filepath.Join(prefix, "bin/master"), "--version").Output()
	if err != nil || !strings.Contains(string(v), "protocol version 1") {
		t.Errorf("installed master --version: %q %v", v, err)
	}
}

// make dist builds a tarball with static binaries (no ELF interpreter, so
// no libc needed on the farm), both masters and the documents.
func TestMakeDist(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("make", "-C", "../..", "dist")
	cmd.Env = append(os.Environ(), "DIST_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	tars, _ := filepath.Glob(filepath.Join(dir, "skillpilot-*-linux-*.tar.gz"))
	if len(tars) != 1 {
		t.Fatalf("tarballs: %v", tars)
	}
	f, err := os.Open(tars[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := h.Name[strings.IndexByte(h.Name, '/')+1:]
		seen[name] = true
		if name == "bin/runner" || name == "bin/master" {
			p := filepath.Join(dir, filepath.Base(name))
			b, _ := io.ReadAll(tr)
			os.WriteFile(p, b, 0o755)
			e, err := elf.Open(p)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, prog := range e.Progs {
				if prog.Type == elf.PT_INTERP {
					t.Errorf("%s is dynamically linked", name)
				}
			}
			e.Close()
		}
	}
	for _, want := range []string{"bin/runner", "bin/master", "python/skillpilot_master.py", "tcl/skillpilot_master.tcl",
		"doc/README.md", "doc/PROTOCOL.md", "INSTALL"} {
		if !seen[want] {
			t.Errorf("%s missing from the tarball (has %v)", want, seen)
		}
	}
}
