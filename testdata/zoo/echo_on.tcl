#!/usr/bin/env tclsh
# echo_on.tcl: a shell that turns the terminal's echo back on before every
# prompt, as a shell built on GNU readline sets its own terminal modes
# around each line it reads (readline(3), "rl_prep_terminal"; Synopsys
# shells with sh_enable_line_editing, Innovus's command-line editing).
source [file join [file dirname [info script]] repl.tcl]
set ::zoo::prompt1 "innovus %d> "
set ::zoo::before_prompt {catch {exec stty echo <@stdin}}
::zoo::repl
