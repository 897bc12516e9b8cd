#!/usr/bin/env tclsh
# source_echo.tcl: a shell whose `source` is the vendor's, not Tcl's.
# Synopsys shells' source takes -echo (print each command before it runs)
# and -verbose (print each command's result) and no other option ("Using
# Tcl With Synopsys Tools", "Including Tcl Scripts"); sites make them the
# default (alias source "source -echo -verbose" in .synopsys_pt.setup), and
# Cadence's source takes -verbose too. Like OpenSTA's (a proc over source_)
# it returns nothing, and it goes on after a command that fails, printing
# the error (PrimeTime with sh_continue_on_error true). Tcl's own source is
# left as builtin_source, as OpenSTA does.
source [file join [file dirname [info script]] repl.tcl]
set ::zoo::prompt1 "pt_shell> "
rename ::source ::builtin_source
proc ::source {args} {
    set echo 1
    set verbose 1
    set file ""
    foreach a $args {
        switch -glob -- $a {
            -e - -echo { set echo 1 }
            -v - -verbose { set verbose 1 }
            -* { error "unknown option '$a' (CMD-010)" }
            default {
                if {$file ne ""} { error "extra positional option '$a' (CMD-012)" }
                set file $a
            }
        }
    }
    if {$file eq ""} { error "Required argument 'file' was not found (CMD-007)" }
    set f [open $file]
    set text [read $f]
    close $f
    set cmd ""
    foreach line [split $text "\n"] {
        append cmd $line "\n"
        if {![info complete $cmd] || [string trim $cmd] eq ""} { continue }
        if {$echo} { puts [string trimright $cmd] }
        if {[catch {uplevel #0 $cmd} res]} {
            puts "Error: $res"
        } elseif {$verbose && $res ne ""} {
            puts $res
        }
        set cmd ""
    }
    return ""
}
::zoo::repl
