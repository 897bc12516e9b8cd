package testenv

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Module is the import path of this module; the main packages the tests
// build are below it.
const Module = "github.com/skillpilot/skillpilot"

// The main packages the tests build.
const (
	Runner = Module + "/cmd/runner"
	Master = Module + "/cmd/master"
	// MasterMCP is the binary `master mcp` runs (found through
	// $SP_MASTER_MCP in tests).
	MasterMCP = Module + "/cmd/master-mcp"
	// MasterHistory is the binary the lean master (-tags lean, as make
	// build builds it) runs for report, standin and diff.
	MasterHistory = Module + "/cmd/master-history"
)

// BuildOption changes how [BuildBinary] builds.
type BuildOption func(*buildConfig)

type buildConfig struct {
	tags []string
	env  []string
}

// WithTags builds with -tags (e.g. "sp_failpoints").
func WithTags(tags ...string) BuildOption {
	return func(c *buildConfig) { c.tags = append(c.tags, tags...) }
}

// WithEnv adds KEY=VALUE pairs to the go command's environment (e.g.
// "CGO_ENABLED=0" for a static binary).
func WithEnv(kv ...string) BuildOption {
	return func(c *buildConfig) { c.env = append(c.env, kv...) }
}

// keepUnused is how long a cached binary that no test has asked for is kept.
const keepUnused = 2 * time.Hour

var (
	buildMu sync.Mutex
	builds  = map[string]*buildEntry{} // by key
)

type buildEntry struct {
	once sync.Once
	path string
	err  error
}

// BuildBinary returns the path of an executable built from the main package
// pkg (an import path, e.g. [Runner]), without the race detector and with
// CGO_ENABLED=0, as make build and make install ship it (one build flavour
// for the tests, make install, vet, the benchmarks and the NFS suite: a
// fresh CI machine compiles the standard library and the module once for
// all of them, not once per flavour; make dist adds -trimpath, a flavour
// of its own). It builds at most once per test process and reuses a
// binary another test process built from the same module content (see the
// package doc); concurrent calls wait for one build. A failed build fails
// the test with the go command's output.
func BuildBinary(t testing.TB, pkg string, opts ...BuildOption) string {
	t.Helper()
	p, err := Build(pkg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Build is [BuildBinary] for a TestMain, which has no testing.TB.
func Build(pkg string, opts ...BuildOption) (string, error) {
	c := buildConfig{env: []string{"CGO_ENABLED=0"}} // WithEnv may override it: the last value wins.
	for _, o := range opts {
		o(&c)
	}
	root, sum, err := moduleSum()
	if err != nil {
		return "", err
	}
	key := buildKey(sum, pkg, c)
	buildMu.Lock()
	e := builds[key]
	if e == nil {
		e = &buildEntry{}
		builds[key] = e
	}
	buildMu.Unlock()
	e.once.Do(func() { e.path, e.err = buildCached(root, key, pkg, c) })
	if e.err == nil {
		now := time.Now()
		_ = os.Chtimes(filepath.Dir(e.path), now, now) // Still in use: not pruned.
	}
	return e.path, e.err
}

func buildKey(moduleSum, pkg string, c buildConfig) string {
	h := sha256.New()
	tags := append([]string(nil), c.tags...)
	sort.Strings(tags)
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s/%s\x00%q\x00%q\x00", moduleSum, pkg, runtime.Version(), runtime.GOOS, runtime.GOARCH, tags, c.env)
	for _, k := range []string{"GOFLAGS", "CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOEXPERIMENT", "GOTOOLCHAIN", "CC"} {
		fmt.Fprintf(h, "%s=%s\x00", k, os.Getenv(k))
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// buildCached returns the binary under the cache directory's key, building
// it into a private directory and renaming that into place first when it
// is not there. Of two processes that build at once, the first rename wins
// and the other uses its binary.
func buildCached(root, key, pkg string, c buildConfig) (string, error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	name := path.Base(pkg)
	final := filepath.Join(cache, key, name)
	if fi, err := os.Stat(final); err == nil && fi.Mode().IsRegular() {
		return final, nil
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return "", err
	}
	// Gone after the rename; the losing process's copy otherwise.
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil { // Some tests run it as another user.
		return "", err
	}
	args := []string{"build", "-o", filepath.Join(tmp, name)}
	if len(c.tags) > 0 {
		args = append(args, "-tags", strings.Join(c.tags, ","))
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), c.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testenv: go build %s: %v\n%s", pkg, err, out)
	}
	if err := os.Chmod(filepath.Join(tmp, name), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(cache, key)); err != nil && !isExist(err) {
		return "", err
	}
	return final, nil
}

func isExist(err error) bool {
	return errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY)
}

var (
	cacheOnce sync.Once
	cachePath string
	cacheErr  error
)

// cacheDir returns the directory of cached binaries, $TMPDIR/skillpilot-
// testbin-UID, created on first use; it must belong to this user and be
// writable by no one else (the binaries in it are executed). Entries no
// test has used for keepUnused are removed.
func cacheDir() (string, error) {
	cacheOnce.Do(func() {
		cachePath = filepath.Join(os.TempDir(), fmt.Sprintf("skillpilot-testbin-%d", os.Getuid()))
		switch err := os.Mkdir(cachePath, 0o755); {
		case err == nil:
			_ = os.Chmod(cachePath, 0o755) // Whatever the umask: some tests run the binaries as another user.
		case !errors.Is(err, fs.ErrExist):
			cacheErr = err
			return
		}
		fi, err := os.Lstat(cachePath)
		if err != nil {
			cacheErr = err
			return
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o022 != 0 {
			cacheErr = fmt.Errorf("testenv: %s is not a directory of this user writable only by it; remove it", cachePath)
			return
		}
		prune(cachePath)
	})
	return cachePath, cacheErr
}

// prune removes cached builds (and abandoned build directories) not used
// for keepUnused.
func prune(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > keepUnused {
			_ = os.RemoveAll(filepath.Join(dir, e.Name())) // Best effort.
		}
	}
}

// skipDirs are directories no build reads.
var skipDirs = map[string]bool{"testdata": true, "bin": true, "dist": true, "artifacts": true, "__pycache__": true}

// buildInputs are the extensions of files a build reads (sources and
// embedded files).
var buildInputs = map[string]bool{".go": true, ".mod": true, ".sum": true, ".s": true, ".c": true, ".h": true,
	".tmpl": true, ".html": true, ".css": true, ".js": true, ".tcl": true, ".json": true}

var (
	sumOnce sync.Once
	sumRoot string
	sumHex  string
	sumErr  error
)

// moduleSum returns the module's root directory and a hash of the files a
// build can read: non-test Go sources, go.mod and go.sum, and files of the
// kinds the packages embed (templates, CSS, JavaScript, Tcl, JSON),
// outside testdata/, hidden directories and what tests and builds write
// (bin/, dist/, artifacts/, __pycache__/). Computed once per process.
func moduleSum() (string, string, error) {
	sumOnce.Do(func() {
		sumRoot, sumErr = ModuleRoot()
		if sumErr != nil {
			return
		}
		h := sha256.New()
		sumErr = filepath.WalkDir(sumRoot, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() {
				if p != sumRoot && (strings.HasPrefix(name, ".") || skipDirs[name]) {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || strings.HasSuffix(name, "_test.go") || !buildInputs[filepath.Ext(name)] {
				return nil
			}
			rel, _ := filepath.Rel(sumRoot, p)
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			fmt.Fprintf(h, "%s\x00", rel)
			_, err = io.Copy(h, f)
			return err
		})
		sumHex = hex.EncodeToString(h.Sum(nil))
	})
	return sumRoot, sumHex, sumErr
}

// ModuleRoot finds the directory of go.mod above the working directory (a
// test runs in its package's directory): the repository's root.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// MasterWithMCP builds the master and master-mcp binaries and returns the
// master's path in a directory of the test's that holds both, as make build
// and go install lay them out: `master mcp` finds master-mcp beside itself.
func MasterWithMCP(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []struct{ pkg, name string }{{Master, "master"}, {MasterMCP, "master-mcp"}} {
		LinkBinary(t, BuildBinary(t, b.pkg), filepath.Join(dir, b.name))
	}
	return filepath.Join(dir, "master")
}

// LinkBinary puts the binary src at dst (a hard link, or a copy across
// filesystems), so that binaries that find each other beside themselves
// (master mcp, the lean master's report) can be laid out as make build
// lays them out.
func LinkBinary(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.Link(src, dst); err != nil {
		data, rerr := os.ReadFile(src)
		if rerr != nil {
			t.Fatal(rerr)
		}
		WriteExecutable(t, dst, data)
	}
}

// WriteExecutable writes an executable file (mode 0755) at path, through
// a child process, never by an open of this process: a file this process
// held open for writing is inherited by whatever another parallel test
// forks at that moment, and executing the file then fails with "text file
// busy" (ETXTBSY) until that child has exec'd.
func WriteExecutable(t testing.TB, path string, data []byte) {
	t.Helper()
	w := exec.Command("sh", "-c", `cat >"$1" && chmod 755 "$1"`, "sh", path)
	w.Stdin = bytes.NewReader(data)
	if out, err := w.CombinedOutput(); err != nil {
		t.Fatalf("writing %s: %v: %s", path, err, out)
	}
}
