package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// completionFlags is master completion's flags (none of its own; see its
// entry in verbs) and its run: it prints a shell's completion script.
// The scripts ask `master __complete WORDS...` for
// candidates, so commands, flags and cmd_ids are completed by the binary
// itself and never go stale.
func completionFlags(cmd *command) runFunc {
	return func(_ context.Context, pos []string) error {
		c := cmd.c
		if len(pos) != 1 {
			return usageErr("want one shell: bash, zsh or fish")
		}
		script, ok := completionScript(pos[0])
		if !ok {
			return usageErr("unknown shell %q: want bash, zsh or fish", pos[0])
		}
		_, err := io.WriteString(c.stdout, script)
		return err
	}
}

// completionScript returns the completion script for shell. A switch, not
// a map: a package map is built at every start of every command (issue 44).
func completionScript(shell string) (string, bool) {
	switch shell {
	case "bash":
		return completionBash, true
	case "zsh":
		return completionZsh, true
	case "fish":
		return completionFish, true
	}
	return "", false
}

const (
	completionBash = `# bash completion for master (SkillPilot): source <(master completion bash)
_master() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	case $prev in
	--session|--pool|--from) COMPREPLY=($(compgen -d -- "$cur")); return ;;
	-f|-o|--init|--runner) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	esac
	local IFS=$'\n'
	COMPREPLY=($("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _master master
`
	completionZsh = `#compdef master
# zsh completion for master (SkillPilot): source <(master completion zsh), after compinit
_master() {
	case ${words[CURRENT-1]} in
	--session|--pool|--from) _files -/; return ;;
	-f|-o|--init|--runner) _files; return ;;
	esac
	local -a cands
	cands=("${(@f)$(${words[1]} __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	if [[ -n ${cands[1]} ]]; then
		compadd -Q -a cands
	else
		_files
	fi
}
compdef _master master
`
	completionFish = `# fish completion for master (SkillPilot): master completion fish | source
function __master_complete
	set -l words (commandline -opc)
	set -l cur (commandline -ct)
	master __complete $words[2..-1] "$cur" 2>/dev/null
end
complete -c master -f -a '(__master_complete)'
complete -c master -l session -r -f -a '(__fish_complete_directories)'
complete -c master -l pool -r -f -a '(__fish_complete_directories)'
`
)

// signalNames are what master signal sends: every signal a request may
// name (TERM and KILL were missing).
var signalNames = protocol.Signals

// complete prints the candidates for the last of words (the words after
// "master", the last one being completed, maybe empty), one a line.
func (c *cli) complete(ctx context.Context, words []string) error {
	for _, w := range completions(ctx, words) {
		fmt.Fprintln(c.stdout, w)
	}
	return nil
}

// completions are the candidates for the last of words.
func completions(ctx context.Context, words []string) []string {
	if len(words) == 0 {
		words = []string{""}
	}
	session := sessionOf(words[:len(words)-1])
	// --session DIR and --json may come before the command.
	for len(words) > 1 && strings.HasPrefix(words[0], "-") {
		if n := strings.TrimLeft(words[0], "-"); n == "session" && len(words) > 2 {
			words = words[1:]
		}
		words = words[1:]
	}
	cur := words[len(words)-1]
	if len(words) == 1 {
		return withPrefix(names(verbs), cur)
	}
	name, rest := words[0], words[1:len(words)-1]
	if name == "help" {
		switch {
		case len(rest) == 0:
			return withPrefix(names(verbs), cur)
		case len(rest) == 1 && rest[0] == "pool":
			return withPrefix(names(poolVerbs), cur)
		}
		return nil
	}
	if name == "completion" {
		return withPrefix([]string{"bash", "zsh", "fish"}, cur)
	}
	if name == "pool" {
		if len(rest) == 0 {
			return withPrefix(names(poolVerbs), cur)
		}
		if strings.HasPrefix(cur, "-") {
			return withPrefix(flagsOf(ctx, "pool", rest[0]), cur)
		}
		return nil
	}
	if strings.HasPrefix(cur, "-") {
		return withPrefix(flagsOf(ctx, name), cur)
	}
	pos := positionals(flagSetOf(name), rest)
	switch v := find(verbs, name); {
	case v != nil && v.takesID && len(pos) == 0:
		return withPrefix(cmdIDs(session), cur)
	case name == "signal" && len(pos) == 1:
		return withPrefix(signalNames, cur)
	}
	return nil
}

// withPrefix returns the names starting with prefix.
func withPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// flagsOf lists a command's flags ("--name") from its own --help, so the
// list is the one the command parses. A command of another binary (master
// mcp) has none here: completing a word starts no other program.
func flagsOf(ctx context.Context, cmd ...string) []string {
	if v := find(verbs, cmd[0]); v == nil || v.list == listMore {
		return nil
	}
	var buf bytes.Buffer
	h := &cli{stdout: &trackWriter{w: &buf}, stderr: io.Discard}
	_ = h.run(ctx, cmd[0], append(cmd[1:], "--help"))
	var out []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if rest, ok := strings.CutPrefix(l, "  --"); ok { // The help spells flags --name (flaghelp).
			out = append(out, "--"+strings.Fields(rest)[0])
		}
	}
	return out
}

// positionals drops the flags of fs (and the values of those that take
// one) from words.
func positionals(fs *flag.FlagSet, words []string) []string {
	var out []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") || w == "-" {
			out = append(out, w)
			continue
		}
		if !strings.Contains(w, "=") && takesValue(fs, strings.TrimLeft(w, "-")) {
			i++
		}
	}
	return out
}

// flagSetOf is the flag set of the command name (a verb of the table with
// flags) as its dispatch builds it, or nil.
func flagSetOf(name string) *flag.FlagSet {
	v := find(verbs, name)
	if v == nil || v.flags == nil {
		return nil
	}
	h := &cli{stdout: &trackWriter{w: io.Discard}, stderr: io.Discard, verb: name}
	cmd, _ := h.build(v)
	return cmd.FlagSet
}

// takesValue reports whether the flag name of fs takes a value: every
// flag does but a boolean one (the flag package's rule); an unknown flag
// takes none.
func takesValue(fs *flag.FlagSet, name string) bool {
	if fs == nil {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// sessionOf is the --session in words, else $SP_SESSION_DIR.
func sessionOf(words []string) string {
	for i, w := range words {
		switch {
		case (w == "--session" || w == "-session") && i+1 < len(words):
			return words[i+1]
		case strings.HasPrefix(w, "--session="), strings.HasPrefix(w, "-session="):
			return w[strings.Index(w, "=")+1:]
		}
	}
	return os.Getenv("SP_SESSION_DIR")
}

// cmdIDs lists the cmd_ids of the session's commands, queued, running or
// finished, newest (highest seq) first, at most 500.
func cmdIDs(dir string) []string {
	if dir == "" {
		return nil
	}
	r, err := fsq.OpenRoot(dir) // Names only, never through a symlink.
	if err != nil {
		return nil
	}
	defer r.Close()
	type entry struct {
		seq int64
		id  string
	}
	var all []entry
	for _, d := range []string{protocol.DirQueue, protocol.DirInflight, protocol.DirResult} {
		names, _ := r.ReadNames(d)
		for _, n := range names {
			if seq, id, err := protocol.ParseCommandName(n); err == nil {
				all = append(all, entry{seq, id})
			}
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return int(b.seq - a.seq) })
	var out []string
	for _, e := range all {
		if !slices.Contains(out, e.id) {
			out = append(out, e.id)
		}
		if len(out) == 500 {
			break
		}
	}
	return out
}
