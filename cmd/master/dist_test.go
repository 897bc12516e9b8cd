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

	"github.com/skillpilot/skillpilot/internal/testenv"
)

// make install PREFIX=... puts both binaries, the Python and Tcl masters
// and the documents where docs/operations.md says; the installed master runs.
func TestMakeInstall(t *testing.T) {
	testenv.Slow(t, "make install builds the binaries")
	testenv.NeedTool(t, "make", "make")
	prefix := filepath.Join(t.TempDir(), "opt")
	out, err := exec.Command("make", "-C", "../..", "install", "PREFIX="+prefix, "BIN="+t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{"bin/runner", "bin/master", "bin/master-history", "bin/master-mcp", "share/skillpilot/python/skillpilot_master.py",
		"share/skillpilot/tcl/skillpilot_master.tcl", "share/doc/skillpilot/README.md", "share/doc/skillpilot/PROTOCOL.md",
		"share/doc/skillpilot/docs/mcp.md", "share/doc/skillpilot/docs/reference/master.md", "share/man/man1/master.1", "share/man/man1/runner.1"} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	want := treeVersion(t)
	for _, bin := range []string{"bin/master", "bin/runner"} {
		v, err := exec.Command(filepath.Join(prefix, bin), "--version").Output()
		if err != nil || !strings.Contains(string(v), "protocol version 1") || !strings.Contains(string(v), "(build "+want+"),") {
			t.Errorf("installed %s --version: %q %v (want the tree's version %s, not (devel))", bin, v, err, want)
		}
	}
}

// treeVersion is the version make stamps into the binaries (and make dist
// into the tarball's name).
func treeVersion(t *testing.T) string {
	out, err := exec.Command("../../scripts/version.sh").Output()
	if err != nil || len(strings.TrimSpace(string(out))) == 0 {
		t.Fatalf("scripts/version.sh: %q %v", out, err)
	}
	return strings.TrimSpace(string(out))
}

// make dist builds a tarball with static binaries (no ELF interpreter, so
// no libc needed on the farm), both masters and the documents.
func TestMakeDist(t *testing.T) {
	testenv.Slow(t, "make dist builds and packs the tree")
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
	version := treeVersion(t)
	if !strings.HasPrefix(filepath.Base(tars[0]), "skillpilot-"+version+"-linux-") {
		t.Errorf("tarball %s is not named for version %s", tars[0], version)
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
			if v, err := exec.Command(p, "--version").Output(); err != nil || !strings.Contains(string(v), "(build "+version+"),") {
				t.Errorf("%s --version: %q %v, want version %s (the tarball's)", name, v, err, version)
			}
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
	for _, want := range []string{"bin/runner", "bin/master", "bin/master-history", "bin/master-mcp", "python/skillpilot_master.py", "tcl/skillpilot_master.tcl",
		"doc/README.md", "doc/PROTOCOL.md", "doc/docs/mcp.md", "doc/docs/reference/runner.md", "man/man1/runner.1", "man/man1/master.1", "INSTALL"} {
		if !seen[want] {
			t.Errorf("%s missing from the tarball (has %v)", want, seen)
		}
	}
}
