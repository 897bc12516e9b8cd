# repl.tcl: the read-eval-print loop the Tcl shells of the zoo share. It has
# the shape of every vendor Tcl shell (tclsh(1), "Using Tcl With Synopsys
# Tools", the Innovus and Vivado user guides): print a prompt without a
# newline, read lines until they make a whole command (info complete),
# evaluate it at the global level, print its result when it is not empty
# and an error the way the vendor prints it, then prompt again right after
# whatever the command printed, also when that lacks a final newline. Like
# tclsh it honours tcl_prompt1 (a script that prints the prompt).
#
# A shell of the zoo sources this file, changes what its behaviour is
# about (the variables below, or a command it redefines) and calls
# ::zoo::repl. Nothing here is the runner's: the tests run these shells
# under the runner exactly as a user would run the vendor's tool.
namespace eval ::zoo {
    variable n 1             ;# the number the next numbered prompt shows
    variable prompt1 {% }    ;# the prompt; %d stands for the command number
    variable prompt2 {}      ;# the prompt while a command is incomplete
    variable errfmt {Error: %s}
    variable echo 0          ;# 1: print each line read (the tool echoes its input)
    variable out stdout      ;# the channel of prompts and error messages
    variable before_prompt {} ;# a script run before each prompt
}
# The process's own exit, kept for the end of input whatever a shell makes
# of the exit command.
rename ::exit ::zoo::quit
proc ::exit {{code 0}} { ::zoo::quit $code }

fconfigure stdout -buffering line

proc ::zoo::prompt {} {
    variable out
    if {[info exists ::tcl_prompt1]} {
        if {[catch {uplevel #0 $::tcl_prompt1} msg]} { puts -nonewline $out "prompt: $msg% " }
    } else {
        puts -nonewline $out [string map [list %d $::zoo::n] $::zoo::prompt1]
    }
    flush $out
}

proc ::zoo::repl {} {
    variable out
    set buf ""
    while 1 {
        if {$::zoo::before_prompt ne ""} { uplevel #0 $::zoo::before_prompt }
        if {$buf eq ""} {
            ::zoo::prompt
        } else {
            puts -nonewline $out $::zoo::prompt2
            flush $out
        }
        if {[gets stdin line] < 0} {
            if {[eof stdin]} { ::zoo::quit 0 }
            continue
        }
        if {$::zoo::echo} { puts $out $line }
        append buf $line "\n"
        if {![info complete $buf]} { continue }
        set code [catch {uplevel #0 $buf} res]
        set buf ""
        incr ::zoo::n
        if {$code == 1} {
            puts $out [format $::zoo::errfmt $res]
        } elseif {$res ne ""} {
            puts $res
        }
        flush stdout
    }
}
