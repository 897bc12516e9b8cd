#!/usr/bin/env tclsh
# linewise.tcl: a shell that behaves as OpenSTA 2.0.17's does (measured,
# PITFALLS.md): it evaluates every line it reads on its own (a proc split
# over lines is an error), echoes each line it reads although the
# terminal's echo is off, prints a prompt, prints no command's value,
# and prints errors. The tests run every Tcl promise on it beside the
# real shells, so the runner never relies on tclsh forgiving more.
fconfigure stdout -buffering none
while 1 {
    puts -nonewline "Linewise> "
    flush stdout
    if {[gets stdin line] < 0} { exit 0 }
    puts $line
    if {[catch {uplevel #0 $line} msg]} { puts $msg }
}
