package runner

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
)

// A driver knows how to talk to one kind of tool: what to type once at
// start, how to run a payload so that it prints the begin line and the
// done marker, and how to ask for a bare sync marker. Every line it returns
// is one short line (far below the 4096-byte canonical-mode limit) that the
// tool's echo cannot turn into a marker: a typed line never starts with the
// marker prefix.
type driver interface {
	bootstrap() string
	// run returns the line that runs a payload. inline is the payload when
	// it is short enough to type, else "" and file holds it.
	run(file, inline, prefix, token string, wrap bool) string
	sync(prefix, token string) string
	// inlineMax is the largest payload run types inline (0: never).
	inlineMax() int
}

func newDriver(k protocol.Kind) driver {
	if k == protocol.KindSh {
		return shDriver{}
	}
	return tclDriver{}
}

// tclDriver runs payloads at the global level (uplevel #0) under catch, so a
// Tcl error still reaches the marker, with the return code and the payload's
// result (its value) in the marker line.
type tclDriver struct{}

// The helpers live in namespace ::__sp so they do not collide with user
// procs. run prints the begin line after a newline (the prompt may precede
// it) and the done line after a newline the framer strips again.
const tclBootstrap = `namespace eval ::__sp {variable vmax %d};` +
	`proc ::__sp::fin {p t rc res} {set b [encoding convertto utf-8 $res];set vt 0;` +
	`if {[string length $b]>$::__sp::vmax} {set b [string range $b 0 [expr {$::__sp::vmax-1}]];set vt 1};` +
	`catch {flush stderr};puts "\n$p $t rc=$rc v=[binary encode base64 $b] vt=$vt";flush stdout};` +
	`proc ::__sp::src {f p t} {puts "\n__SP_BEGIN__ $t";flush stdout;` +
	`set rc [catch {uplevel #0 [list source -encoding utf-8 $f]} res];catch {flush stdout};::__sp::fin $p $t $rc $res;return};` +
	`proc ::__sp::ev {b p t} {puts "\n__SP_BEGIN__ $t";flush stdout;` +
	`set rc [catch {uplevel #0 [encoding convertfrom utf-8 [binary decode base64 $b]]} res];catch {flush stdout};::__sp::fin $p $t $rc $res;return};` +
	`proc ::__sp::raw {f t} {puts "\n__SP_BEGIN__ $t";flush stdout;uplevel #0 [list source -encoding utf-8 $f];return};` +
	`proc ::__sp::sync {p t} {puts "\n$p $t rc=0";flush stdout;return}`

func (tclDriver) bootstrap() string { return fmt.Sprintf(tclBootstrap, maxValue) }

func (tclDriver) run(file, inline, prefix, token string, wrap bool) string {
	if !wrap {
		return "::__sp::raw " + tclQuote(file) + " " + token
	}
	if inline != "" {
		return "::__sp::ev " + base64.StdEncoding.EncodeToString([]byte(inline)) + " " + prefix + " " + token
	}
	return "::__sp::src " + tclQuote(file) + " " + prefix + " " + token
}

func (tclDriver) sync(prefix, token string) string { return "::__sp::sync " + prefix + " " + token }

// Inline payloads travel as base64 on the typed line; 2 KiB of payload
// keeps the line near 2.8 KiB, well under the 4095-byte line limit.
func (tclDriver) inlineMax() int { return 2048 }

// tclQuote quotes s as one Tcl word.
func tclQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\', '"', '$', '[', ']', '{', '}', ';':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// shDriver drives a POSIX shell (bash, sh): the payload is sourced with '.',
// its status $? is the return code. There is no value.
type shDriver struct{}

const shBootstrap = `__sp_src() { printf '\n__SP_BEGIN__ %s\n' "$3"; . "$1"; __sp_rc=$?; printf '\n%s %s rc=%d\n' "$2" "$3" "$__sp_rc"; }; ` +
	`__sp_raw() { printf '\n__SP_BEGIN__ %s\n' "$2"; . "$1"; }; ` +
	`__sp_sync() { printf '\n%s %s rc=0\n' "$1" "$2"; }`

func (shDriver) bootstrap() string { return shBootstrap }

func (shDriver) run(file, _, prefix, token string, wrap bool) string {
	if !wrap {
		return "__sp_raw " + shQuote(file) + " " + token
	}
	return "__sp_src " + shQuote(file) + " " + prefix + " " + token
}

func (shDriver) sync(prefix, token string) string { return "__sp_sync " + prefix + " " + token }

func (shDriver) inlineMax() int { return 0 }

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
