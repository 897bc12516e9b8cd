#!/usr/bin/env tclsh
# readahead.tcl: a line shell that reads ahead, as one built on C's stdio
# may: its terminal is taken out of canonical mode, so one read takes
# every line typed so far into the shell's own buffer. The terminal's
# input queue is then empty while lines still wait in the shell to be run,
# and a command that prints half a line and computes looks, from the
# terminal alone, like a shell that read the lines ending the command into
# an unfinished statement (ngspice on a loaded host was judged so once).
# It runs one complete Tcl command at a time; an unfinished one takes the
# lines after it, with the prompt "...> "; the prompt is "RA> ". It prints
# no command's value, and errors as "error: MESSAGE".
exec stty -icanon min 1 time 0 <@ stdin
fconfigure stdin -buffering full -buffersize 65536 -translation lf
fconfigure stdout -buffering none -translation lf
set buf ""
while 1 {
    puts -nonewline [expr {$buf eq "" ? "RA> " : "...> "}]
    if {[gets stdin line] < 0} { exit 0 }
    append buf $line \n
    if {![info complete $buf]} continue
    set cmd $buf
    set buf ""
    if {[catch {uplevel #0 $cmd} msg]} { puts "error: $msg" }
}
