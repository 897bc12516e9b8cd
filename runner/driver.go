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
	// it is short enough to type, else "" and file holds it. nonce, when
	// not "", is the command's secret: its done line must carry it
	// (n=<nonce>), so that a payload printing "<prefix> <token>" does not
	// end its own command (PROTOCOL.md 6.2).
	run(file, inline, prefix, token, nonce string, wrap bool) string
	sync(prefix, token string) string
	// fence returns the line the runner types once it has seen the done
	// marker of a payload run with token: the helper that ran it reads
	// and drops input up to that line before it returns to the prompt
	// (see fenceLine).
	fence(token string) string
	// inlineMax is the largest payload run types inline (0: never).
	inlineMax() int
	// check refuses a payload the driver cannot deliver whole.
	check(payload string) error
	// payloadFile is what the payload file of a payload run with token
	// holds.
	payloadFile(payload, token string) string
	// line is the driver's line rules (linedriver.go), nil for tcl and sh.
	// Their done marker carries a command's outcome; a line driver's tool
	// only prints, so the runner frames what it prints with begin and end
	// lines, learns its prompt, reads its errors from patterns and types
	// the done line once the payload file has run: a protocol of its own
	// in each phase, which asks for the rules, not for a method.
	line() *lineDriver
}

// newDriver returns the driver of c's kind: its Driver's when it is set.
func newDriver(c Config) driver {
	switch {
	case c.Driver != nil:
		return newLineDriver(c.Driver)
	case c.Kind == protocol.KindSh:
		return shDriver{}
	}
	return tclDriver{interactive: c.TclInteractive, utf8: localeUTF8(toolEnviron(c.Env))}
}

// tclDriver runs payloads at the global level (uplevel #0) under catch, so a
// Tcl error still reaches the marker, with the return code and the payload's
// result (its value) in the marker line.
type tclDriver struct {
	// interactive: payloads run with the tool's tcl_interactive
	// (--tcl-interactive), not 0.
	interactive bool
	// utf8: the locale the runner gives the tool says UTF-8 (localeUTF8),
	// so the helpers make utf-8 the shell's encoding if it is not.
	utf8 bool
}

// localeUTF8 reports whether env's locale says UTF-8: LC_ALL, else
// LC_CTYPE, else LANG, as a C library reads them. The runner decides it
// from the environment it gives the tool, not from the tool's ::env: a
// shell may set LC_CTYPE=C for itself (gtkwave does) and keep Latin-1.
func localeUTF8(env []string) bool {
	vals := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vals[k] = v
		}
	}
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := vals[k]; v != "" {
			v = strings.ToLower(v)
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	return false
}

// The helpers live in namespace ::__sp so they do not collide with user
// procs, and are written to survive what a payload, the tool or a user's
// --init may have done to the interpreter (PROTOCOL.md 6.4):
//
//   - a payload never runs through a command the tool may redefine: the
//     helpers never call source (OpenSTA and the Synopsys and Cadence
//     shells wrap it: their source returns nothing and goes on after an
//     error), puts, exit, unknown or rename. A payload file is read in an
//     interpreter of the runner's own (interp create: its open and read
//     are Tcl's) and evaluated at the global level with uplevel #0 under
//     catch, as an inline payload is: the first error stops it, and the
//     value is its last command's;
//   - markers and begin lines go to a channel of their own on the terminal
//     (/dev/tty, the PTY), written with ::tcl::chan::puts;
//   - while a payload runs, tcl_interactive is 0 unless the runner was
//     started with --tcl-interactive: a word that names no command is an
//     error, as in a script, not a program run by interactive Tcl's
//     unknown (which would then hold the terminal);
//   - after the payload, stdout is set back to blocking and flushed and its
//     saved settings (-translation lf, -encoding, -buffering) are restored;
//     the recursion limit and tcl_interactive are put back;
//   - everything the code after the payload needs is in local variables,
//     so deleting ::__sp does not stop the marker; the marker then says
//     h=0 and the runner types the helpers again.
//
// A shell that did not take its encoding from the locale (OpenSTA runs
// with iso8859-1 under LANG=C.UTF-8, printing "?" for what Latin-1 lacks)
// gets utf-8 as its system encoding and on its standard channels when the
// locale the runner gives it says UTF-8 (localeUTF8), as tclsh sets
// itself. The start-up's own loops run in namespace ::__sp: a variable
// left at the global level (v, c) would collide with a payload's. stdout
// and stderr get -translation lf, so that together with the
// terminal's ONLCR being off, output reaches the runner byte for byte.
// run prints the begin line after a newline (the prompt may precede it)
// and the done line after a newline the framer strips again. The start-up
// may be typed more than once (a tool that drops early input, helpers a
// payload deleted): it makes the reading interpreter only when there is
// none.
const tclBootstrap = `namespace eval ::__sp {variable vmax %d;variable ix %d;variable out stdout;variable in stdin;variable rd};` +
	`if {[catch {fconfigure stdin}]} {catch {set ::__sp::in [open /dev/tty r]}};` +
	`catch {set ::__sp::out [open /dev/tty w];fconfigure $::__sp::out -translation lf -encoding utf-8 -buffering none};` +
	`if {![info exists ::__sp::rd]||$::__sp::rd eq {}||![interp exists $::__sp::rd]} {set ::__sp::rd {};catch {set ::__sp::rd [interp create]}};` +
	`namespace eval ::__sp {if {%d&&[encoding system] ne {utf-8}} {encoding system utf-8;foreach c {stdin stdout stderr} {catch {fconfigure $c -encoding utf-8}}};` +
	`foreach c {stdout stderr} {catch {fconfigure $c -translation lf}}};` +
	`set ::__sp::cfg [list -translation lf -encoding [fconfigure stdout -encoding] -buffering [fconfigure stdout -buffering]];` +
	`proc ::__sp::load {f} {set r {{f} {set c [open $f r];fconfigure $c -encoding utf-8 -eofchar "\x1a {}";set s [read $c];close $c;set s}};` +
	`if {$::__sp::rd ne {}} {return [$::__sp::rd eval [list apply $r $f]]};apply $r $f};` +
	`proc ::__sp::ev {b p t {n {}}} {::__sp::x 0 $b $p $t $n};proc ::__sp::src {f p t {n {}}} {::__sp::x 1 $f $p $t $n};proc ::__sp::raw {f t} {::__sp::x 2 $f {} $t};` +
	`proc ::__sp::sync {p t} {::tcl::chan::puts $::__sp::out "\n$p $t rc=0";catch {::tcl::chan::flush $::__sp::out};return}` +
	"\n" + tclRun

// tclRun is the helper the others call: ::__sp::x how arg p t runs a
// payload (how 0: inline, arg its base64; 1: from the file arg; 2: the
// same without the done line, marker.mode payload_contains). It saves what
// the code after the payload needs in local variables, prints the begin
// line, evaluates the payload at the global level under catch, restores
// the interpreter's and stdout's settings, prints the done line — rc, the
// value (cut at vmax bytes of UTF-8), for an error Tcl's errorInfo and
// errorCode (cut at eiMax and ecMax bytes), h=0 if the helpers are gone —
// and reads stdin up to the runner's fence line (tclFence). It is a line
// of its own: the start-up stays under the terminal's 4095-byte line.
const tclRun = `proc ::__sp::x {how a p t {nc {}}} {set o $::__sp::out;set i $::__sp::in;set cfg $::__sp::cfg;set vmax $::__sp::vmax;set rl [interp recursionlimit {}];` +
	`set ti {};if {[info exists ::tcl_interactive]} {set ti $::tcl_interactive;if {!$::__sp::ix} {set ::tcl_interactive 0}};` +
	`catch {::tcl::chan::flush stdout};::tcl::chan::puts $o "\n__SP_BEGIN__ $t";catch {::tcl::chan::flush $o};` +
	`set rc [catch {if {$how} {set s [::__sp::load $a]} {set s [encoding convertfrom utf-8 [binary decode base64 $a]]};uplevel #0 $s} res opts];` +
	`catch {interp recursionlimit {} $rl};if {$ti ne {}} {catch {set ::tcl_interactive $ti}};` +
	`catch {fconfigure stdout -blocking 1};catch {::tcl::chan::flush stdout};catch {fconfigure stdout {*}$cfg};catch {::tcl::chan::flush stderr};` +
	`if {$how!=2} {set bb [encoding convertto utf-8 $res];set vt 0;if {[string length $bb]>$vmax} {set bb [string range $bb 0 [expr {$vmax-1}]];set vt 1};` +
	`set e {};if {$rc==1} {foreach {k f n} {-errorinfo ei ` + eiMaxS + ` -errorcode ec ` + ecMaxS + `} {if {[dict exists $opts $k]} {` +
	`set x [encoding convertto utf-8 [dict get $opts $k]];if {[string length $x]>$n} {set x [string range $x 0 [expr {$n-1}]]};append e " $f=[binary encode base64 $x]"}}};` +
	`set h {};if {![namespace exists ::__sp]} {set h { h=0}};if {$nc ne {}} {append h " n=$nc"};` +
	`::tcl::chan::puts $o "\n$p $t rc=$rc v=[binary encode base64 $bb] vt=$vt$e$h";catch {::tcl::chan::flush $o}};` +
	tclFence + `;if {$how!=2} return;return -options $opts $res}`

// eiMax and ecMax bound Tcl's errorInfo and errorCode in a done line
// (bytes of UTF-8); longer ones are cut (PROTOCOL.md section 7).
const (
	eiMax  = 8 << 10
	ecMax  = 1 << 10
	eiMaxS = "8192"
	ecMaxS = "1024"
)

// tclFence reads and drops stdin up to the line that ends with the fence
// of token $t (PROTOCOL.md section 9.8): input the payload
// did not read never reaches the tool's prompt. It ends early at end of
// file or when reading fails (a payload closed stdin, a Ctrl-C the tool
// turns into an error).
const tclFence = `set fl "` + fenceMark + `$t";set fn [expr {[string length $fl]-1}];catch {fconfigure $i -blocking 1};` +
	`while {![catch {::tcl::chan::gets $i l} n] && $n>=0} {if {[string range $l end-$fn end] eq $fl} break}`

func (d tclDriver) bootstrap() string {
	return fmt.Sprintf(tclBootstrap, maxValue, boolInt(d.interactive), boolInt(d.utf8))
}

func (tclDriver) run(file, inline, prefix, token, nonce string, wrap bool) string {
	if !wrap {
		return "::__sp::raw " + tclQuote(file) + " " + token
	}
	if nonce != "" {
		token += " " + nonce // The helper's last argument (n).
	}
	if inline != "" {
		return "::__sp::ev " + base64.StdEncoding.EncodeToString([]byte(inline)) + " " + prefix + " " + token
	}
	return "::__sp::src " + tclQuote(file) + " " + prefix + " " + token
}

func (tclDriver) sync(prefix, token string) string { return "::__sp::sync " + prefix + " " + token }

func (tclDriver) fence(token string) string { return fenceMark + token }

// Inline payloads travel as base64 on the typed line; 2 KiB of payload
// keeps the line near 2.8 KiB, well under the 4095-byte line limit.
func (tclDriver) inlineMax() int    { return 2048 }
func (tclDriver) line() *lineDriver { return nil }

func (tclDriver) check(string) error { return nil }

func (tclDriver) payloadFile(payload, _ string) string { return payload }

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

const shBootstrap = `__sp_fence() { while IFS= read -r __sp_l; do case $__sp_l in *"` + fenceMark + `$1") break;; esac; done; }; ` +
	`__sp_src() { printf '\n__SP_BEGIN__ %s\n' "$3"; . "$1"; __sp_rc=$?; printf '\n%s %s rc=%d%s\n' "$2" "$3" "$__sp_rc" "${4:+ n=$4}"; __sp_fence "$3"; }; ` +
	`__sp_raw() { printf '\n__SP_BEGIN__ %s\n' "$2"; . "$1"; __sp_rc=$?; __sp_fence "$2"; return $__sp_rc; }; ` +
	`__sp_sync() { printf '\n%s %s rc=0\n' "$1" "$2"; }`

func (shDriver) bootstrap() string { return shBootstrap }

func (shDriver) run(file, _, prefix, token, nonce string, wrap bool) string {
	if !wrap {
		return "__sp_raw " + shQuote(file) + " " + token
	}
	if nonce != "" {
		token += " " + nonce // The function's fourth argument.
	}
	return "__sp_src " + shQuote(file) + " " + prefix + " " + token
}

func (shDriver) sync(prefix, token string) string { return "__sp_sync " + prefix + " " + token }

func (shDriver) fence(token string) string { return fenceMark + token }

func (shDriver) inlineMax() int    { return 0 }
func (shDriver) line() *lineDriver { return nil }

func (shDriver) check(string) error { return nil }

func (shDriver) payloadFile(payload, _ string) string { return payload }

// fenceMark starts the fence line. The line is a comment in Tcl and in a
// POSIX shell, so a tool that reads it at its prompt (its helper was
// interrupted while reading) does nothing with it.
const fenceMark = "#__SP_FENCE__ "

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
