package conformance

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

// Masters are the masters every scenario runs through.
var Masters = []string{"go", "cli", "python", "tcl", "shell"}

// ExecEnv is the environment variable that makes a test binary calling
// Main act as the runner, the master CLI or an adapter.
const ExecEnv = "SP_CONFORMANCE_EXEC"

// adapter is a running adapter process of one master.
type adapter struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *testenv.LockedBuffer
	done   chan struct{}
}

// adapterCommand returns the command line of master's adapter.
func (e *Env) adapterCommand(master, sessionDir string) (*exec.Cmd, error) {
	var argv []string
	env := []string{"PATH=" + e.Bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	switch master {
	case "go", "cli":
		argv = []string{e.Self, sessionDir}
		env = append(env, ExecEnv+"=adapter-"+master, "SP_MASTER_BIN="+filepath.Join(e.Bin, "master"))
	case "python":
		argv = []string{testenv.Python3(), filepath.Join(e.Repo, "internal/conformance/adapters/python_adapter.py"), sessionDir}
		env = append(env, "PYTHONPATH="+filepath.Join(e.Repo, "clients/python"), "PYTHONDONTWRITEBYTECODE=1")
	case "tcl":
		argv = []string{"tclsh", filepath.Join(e.Repo, "internal/conformance/adapters/tcl_adapter.tcl"), sessionDir}
		env = append(env, "TCLLIBPATH="+filepath.Join(e.Repo, "clients/tcl"))
	case "shell":
		argv = []string{"bash", filepath.Join(e.Repo, "clients/sh/skillpilot_master.sh"), sessionDir}
	default:
		return nil, fmt.Errorf("unknown master %q", master)
	}
	argv = append(append([]string{}, e.MasterPrefix...), argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil
}

func startAdapter(cmd *exec.Cmd) (*adapter, error) {
	a := &adapter{cmd: cmd, lines: make(chan string, 16), stderr: &testenv.LockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = a.stderr
	var err error
	if a.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 64<<20) // Grows as long lines need: an outcome may carry megabytes of output.
		for sc.Scan() {
			a.lines <- sc.Text()
		}
		close(a.lines)
	}()
	go func() {
		_ = cmd.Wait()
		close(a.done)
	}()
	return a, nil
}

// send writes one step line.
func (a *adapter) send(line string) error {
	_, err := io.WriteString(a.stdin, line+"\n")
	return err
}

// receive returns the next outcome, or an error after limit.
func (a *adapter) receive(limit time.Duration) (map[string]any, error) {
	select {
	case line, ok := <-a.lines:
		if !ok {
			return nil, fmt.Errorf("adapter exited without an outcome")
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(line), &out); err != nil {
			return nil, fmt.Errorf("adapter printed %q: %v", line, err)
		}
		return out, nil
	case <-time.After(limit):
		return nil, fmt.Errorf("no outcome within %v", limit)
	}
}

// close ends the adapter: quit, then SIGKILL to its process group.
func (a *adapter) close() {
	_ = a.send("quit")
	_ = a.stdin.Close()
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
	}
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
	<-a.done
}

// wireLine encodes a master step for an adapter: "op k=v ...", text values
// (payload, re, text, expect) base64 in k_b64.
func wireLine(args []string) (string, error) {
	parts := []string{args[0]}
	for _, kv := range args[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return "", fmt.Errorf("master step argument %q is not K=V", kv)
		}
		switch k {
		case "payload", "re", "text", "expect":
			parts = append(parts, k+"_b64="+base64.StdEncoding.EncodeToString([]byte(v)))
		default:
			if strings.ContainsAny(v, " \t\n") {
				return "", fmt.Errorf("value of %s must not contain blanks", k)
			}
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " "), nil
}

// normalize turns an adapter's outcome into strings by key: output and
// match decoded from base64, a result_file read as the shell master's
// reader would (value, error_message, output), null as "".
func normalize(raw map[string]any, masterDir string) (map[string]string, error) {
	out := map[string]string{}
	var flatten func(prefix string, m map[string]any)
	flatten = func(prefix string, m map[string]any) {
		for k, v := range m {
			out[prefix+k] = scalar(v)
			if sub, ok := v.(map[string]any); ok { // "reply": {"match_span": {"start": 7}} gives reply.match_span.start.
				flatten(prefix+k+".", sub)
			}
		}
	}
	flatten("", raw)
	for _, k := range []string{"output", "match"} {
		if b64, ok := out[k+"_b64"]; ok {
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return nil, fmt.Errorf("%s_b64: %v", k, err)
			}
			out[k] = string(b)
			delete(out, k+"_b64")
		}
	}
	if rf := out["result_file"]; rf != "" {
		data, err := os.ReadFile(filepath.Join(masterDir, rf))
		if err != nil {
			return nil, err
		}
		var res struct {
			CmdID      string  `json:"cmd_id"`
			Value      *string `json:"value"`
			OutputPath string  `json:"output_path"`
			Error      *struct {
				Message string         `json:"message"`
				Context map[string]any `json:"context"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, fmt.Errorf("%s: %v", rf, err)
		}
		if res.Value != nil {
			out["value"] = *res.Value
		}
		if res.Error != nil {
			out["error_message"] = res.Error.Message
			for k, v := range res.Error.Context { // Its context as the runner wrote it.
				out["context."+k] = scalar(v)
			}
		}
		out["output"] = ""
		if res.OutputPath != "" { // Commands that never ran have no output file.
			outData, err := os.ReadFile(filepath.Join(masterDir, res.OutputPath))
			if err != nil {
				return nil, err
			}
			out["output"] = string(outData)
		}
	}
	return out, nil
}

func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
