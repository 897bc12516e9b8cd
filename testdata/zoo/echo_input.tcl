#!/usr/bin/env tclsh
# echo_input.tcl: a shell that prints every line it reads after its prompt,
# although the terminal's echo is off, as shells that keep a transcript of
# their input do (OpenSTA 2.0.17 prints each line it reads; Synopsys shells
# with sh_enable_line_editing false under a pipe echo commands into their
# log). Unlike testdata/tools/linewise.tcl it evaluates whole commands.
source [file join [file dirname [info script]] repl.tcl]
set ::zoo::prompt1 "dc_shell> "
set ::zoo::echo 1
::zoo::repl
