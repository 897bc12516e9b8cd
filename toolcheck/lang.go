package toolcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// lang is what the battery types in one kind's language, and what each
// step must give. A step the kind cannot express is "" (its check is not
// applicable, with notApplicable[check] saying why).
type lang struct {
	kind string

	output, outputWant string // exact output
	value, valueWant   string // the value ("" value: the kind has none)
	errPayload         string // a command that fails
	errMsg             string // what error.message must contain
	utf8, utf8Want     string
	noNL, noNLWant     string
	// big is a payload of about 5 KB with an error at line bigErrAt:
	// bigBefore must all be in its output, bigAfter none of it.
	big                 string
	bigErrAt            int
	bigBefore, bigAfter []string
	bigMsg              string

	setState, getState string // a command setting a variable, one telling whether it is set
	stateWant          string // what getState prints (or its value) when it is set

	long, longStarted string // a command that runs until interrupted, and what it prints first
	read, readWant    string // a command that asks "name? " and reads a line; what it prints after "fifty two"

	ownInit, ownInitExt string // the check's own --init script
	initSeen, initWant  string // a command telling whether the check's init ran

	// byValue: getState and initSeen answer by their value (Tcl), not by
	// what they print.
	byValue bool

	notApplicable map[string]string
}

const (
	bigLines = 120
	bigErrAt = 60
	readText = "fifty two"
)

// utf8Text holds characters of two, three and four bytes in UTF-8, and a
// tab; driverUTF8 the same without the tab (a driver's print command
// splits its words at blanks).
const (
	utf8Text   = "é ü ß ∑ 中文 😀 \tend"
	driverUTF8 = "é ü ß ∑ 中文 😀 end"
)

// langFor is the battery of a kind: Tcl, sh, the Yosys and ngspice
// presets; for another driver what its print command and error pattern
// allow. files is a directory for the helper scripts a driver kind runs
// through its shell escape.
func langFor(kind protocol.Kind, drv *runner.DriverSpec, files string) (*lang, error) {
	switch {
	case drv == nil && (kind == protocol.KindTcl || kind == ""):
		return tclLang(), nil
	case drv == nil && kind == protocol.KindSh:
		return shLang(), nil
	case drv != nil && drv.Kind == "yosys":
		return yosysLang(drv, files)
	case drv != nil && drv.Kind == "ngspice":
		return ngspiceLang(drv, files)
	case drv != nil:
		return driverLang(drv), nil
	}
	return nil, fmt.Errorf("kind %s: no driver", kind)
}

func bigLine(i int) string { return "sp check: line " + strconv.Itoa(i) + " of a 5 KB payload" }

// fillBig makes l.big from a command that prints a line, with errLine at
// bigErrAt.
func (l *lang) fillBig(print func(string) string, errLine, msg string) {
	var b strings.Builder
	for i := 1; i <= bigLines; i++ {
		if i == bigErrAt {
			b.WriteString(errLine + "\n")
			continue
		}
		b.WriteString(print(bigLine(i)) + "\n")
		if i < bigErrAt {
			l.bigBefore = append(l.bigBefore, bigLine(i))
		} else {
			l.bigAfter = append(l.bigAfter, bigLine(i))
		}
	}
	l.big, l.bigErrAt, l.bigMsg = b.String(), bigErrAt, msg
}

func tclLang() *lang {
	l := &lang{kind: "tcl", byValue: true,
		output: `puts "sp check: alpha"; puts "\tbraces {} \"quotes\" \\ backslash"`, outputWant: "sp check: alpha\n\tbraces {} \"quotes\" \\ backslash\n",
		value: "expr {6*7}", valueWant: "42",
		errPayload: `puts "sp check: before"; error "sp check: an error"; puts after`, errMsg: "sp check: an error",
		utf8: `puts "` + strings.ReplaceAll(utf8Text, "\t", `\t`) + `"`, utf8Want: utf8Text + "\n",
		noNL: `puts -nonewline "sp check: no newline"`, noNLWant: "sp check: no newline",
		setState: "set ::sp_check_state 1", getState: "info exists ::sp_check_state", stateWant: "1",
		long: `puts "sp check: running"; flush stdout; while 1 {after 20}`, longStarted: "sp check: running",
		// A shell whose interpreter has no stdin channel (Magic) reads the
		// terminal the runner opens for it (PROTOCOL.md 11.1).
		read:     `puts -nonewline "sp check: name? "; flush stdout; set sp_check_ch stdin; if {"stdin" ni [chan names]} {set sp_check_ch $::__sp::in}; puts "got <[gets $sp_check_ch]>"`,
		readWant: "sp check: name? got <" + readText + ">\n",
		ownInit:  "set ::sp_check_init 1\n", ownInitExt: ".tcl",
		initSeen: "info exists ::sp_check_init", initWant: "1",
	}
	l.fillBig(func(s string) string { return `puts "` + s + `"` }, `error "sp check: an error in the middle"`, "sp check: an error in the middle")
	return l
}

func shLang() *lang {
	l := &lang{kind: "sh",
		output: `printf 'sp check: alpha\n'; printf '\tbraces {} "quotes" \\ backslash\n'`, outputWant: "sp check: alpha\n\tbraces {} \"quotes\" \\ backslash\n",
		errPayload: `echo "sp check: before"; echo "sp check: an error" >&2; return 3; echo after`, errMsg: "return code 3",
		utf8: `printf '%s\n' '` + utf8Text + `'`, utf8Want: utf8Text + "\n",
		noNL: `printf 'sp check: no newline'`, noNLWant: "sp check: no newline",
		setState: "sp_check_state=1", getState: `echo "state ${sp_check_state:-unset}"`, stateWant: "state 1",
		long: `echo "sp check: running"; while :; do sleep 1; done`, longStarted: "sp check: running",
		read:     `printf 'sp check: name? '; read -r sp_check_line; echo "got <$sp_check_line>"`,
		readWant: "sp check: name? got <" + readText + ">\n",
		ownInit:  "sp_check_init=1\n", ownInitExt: ".sh",
		initSeen: `echo "init ${sp_check_init:-unset}"`, initWant: "init 1",
		notApplicable: map[string]string{"value": "kind sh has no value (PROTOCOL.md 6.2)"},
	}
	l.fillBig(func(s string) string { return "echo '" + s + "'" }, `echo "sp check: an error in the middle" >&2; return 7`, "return code 7")
	return l
}

// helper writes a shell script the driver kinds run through their shell
// escape (a line typed into them cannot hold every quote).
func helper(files, name, body string) (string, error) {
	p := filepath.Join(files, name)
	return p, os.WriteFile(p, []byte(body), 0o644)
}

const readScript = "printf 'sp check: name? '\nread -r l\nprintf 'got <%s>\\n' \"$l\"\n"

func yosysLang(drv *runner.DriverSpec, files string) (*lang, error) {
	read, err := helper(files, "read.sh", readScript)
	if err != nil {
		return nil, err
	}
	// Yosys's own long command: its Tcl (Debian's Yosys has it), so that
	// Ctrl-C reaches Yosys and not a child of its shell escape.
	long, err := helper(files, "long.tcl", "puts \"sp check: running\"\nflush stdout\nwhile 1 {after 20}\n")
	if err != nil {
		return nil, err
	}
	l := &lang{kind: "yosys",
		output: "log sp check: alpha\nlog sp check: beta", outputWant: "sp check: alpha\nsp check: beta\n",
		errPayload: "log sp check: before\nsp_check_no_such_command\nlog after", errMsg: "sp_check_no_such_command",
		utf8: "log " + driverUTF8, utf8Want: driverUTF8 + "\n",
		noNL: "log -n sp check: no newline", noNLWant: "sp check: no newline",
		setState: "scratchpad -set sp_check.state 1", getState: "scratchpad -get sp_check.state", stateWant: "1",
		long: "tcl " + long, longStarted: "sp check: running",
		read: "!sh " + read, readWant: "got <" + readText + ">",
		ownInit: "scratchpad -set sp_check.init 1\n", ownInitExt: ".ys",
		initSeen: "scratchpad -get sp_check.init", initWant: "1",
		notApplicable: map[string]string{"value": "a driver's kind has no value (PROTOCOL.md 11.1)"},
	}
	l.fillBig(func(s string) string { return "log " + s }, "sp_check_no_such_command", "sp_check_no_such_command")
	return l, nil
}

func ngspiceLang(drv *runner.DriverSpec, files string) (*lang, error) {
	read, err := helper(files, "read.sh", readScript)
	if err != nil {
		return nil, err
	}
	l := &lang{kind: "ngspice",
		output: "echo sp check: alpha\necho sp check: beta", outputWant: "sp check: alpha\nsp check: beta\n",
		errPayload: "echo sp check: before\nsp_check_no_such_command", errMsg: "sp_check_no_such_command",
		utf8: "echo " + driverUTF8, utf8Want: driverUTF8 + "\n",
		noNL: "echo -n sp check: no newline", noNLWant: "sp check: no newline",
		setState: "set sp_check_state = 1", getState: "echo \"state $sp_check_state\"", stateWant: "state 1",
		long: "echo sp check: running\nshell sleep 600", longStarted: "sp check: running",
		read: "shell sh " + read, readWant: "got <" + readText + ">",
		ownInit: "set sp_check_init = 1\n", ownInitExt: ".sp",
		initSeen: "echo \"init $sp_check_init\"", initWant: "init 1",
		notApplicable: map[string]string{"value": "a driver's kind has no value (PROTOCOL.md 11.1)"},
	}
	if drv.Source == "" {
		l.notApplicable["big_error"] = "this kind types a payload line by line, at most 3072 bytes (PROTOCOL.md 11.1): a 5 KB payload is refused, and the lines after an error run"
		l.notApplicable["send"] = "this kind types a payload line by line with the lines that end it (PROTOCOL.md 11.1): a payload that reads the terminal reads those"
		// No command runs a file, so there is no --init (the runner refuses one).
		l.ownInit = ""
	} else {
		l.fillBig(func(s string) string { return "echo " + s }, "sp_check_no_such_command", "sp_check_no_such_command")
	}
	return l, nil
}

// driverLang is what the check can say in a driver's language it does
// not know: its print command, and a word that is no command for its
// error pattern.
func driverLang(drv *runner.DriverSpec) *lang {
	const why = "the check does not know this driver's language: test it in your flow's own checks"
	print := func(s string) string { return strings.Replace(drv.Print, "{}", s, 1) }
	l := &lang{kind: drv.Kind,
		output: print("sp check alpha") + "\n" + print("sp check beta"), outputWant: "sp check alpha\nsp check beta\n",
		notApplicable: map[string]string{
			"value": "a driver's kind has no value (PROTOCOL.md 11.1)", "utf8": why, "no_newline": why,
			"cancel": why, "send": why, "big_error": why,
		},
	}
	if drv.Error != "" {
		// A word that names nothing, then an unbalanced bracket: one of
		// the two is an error in any language a REPL speaks (bc takes
		// the first for a variable).
		l.errPayload, l.errMsg = "sp_check_no_such_command\n)(", ""
	} else {
		l.notApplicable["error"] = "the driver has no error pattern: its commands never fail"
	}
	return l
}
