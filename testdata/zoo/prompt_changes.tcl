#!/usr/bin/env tclsh
# prompt_changes.tcl: a prompt that a command changes. Like tclsh (tclsh(1),
# "tcl_prompt1") the shell evaluates the script in tcl_prompt1 to print its
# prompt, and its start-up script sets one that shows the current design,
# as Genus's prompt shows its current directory in the design
# ("@genus:root: 1> " becomes "@genus:design:top 2> " after a cd; Genus
# User Guide). The payload "current_design top" changes the prompt for
# every later command.
source [file join [file dirname [info script]] repl.tcl]
set ::design root
proc current_design {{name ""}} {
    if {$name ne ""} { set ::design $name }
    return $::design
}
set ::tcl_prompt1 {puts -nonewline "@zoo:$::design: $::zoo::n> "}
::zoo::repl
