# Runs every tcltest file of the Tcl master in this process:
#   tclsh clients/tcl/tests/all.tcl ?tcltest options?
# Exit status 1 when any test failed.
package require tcltest 2.5
namespace import ::tcltest::*
configure -testdir [file dirname [file normalize [info script]]] -singleproc 1 \
    -tmpdir [file join [expr {[info exists ::env(TMPDIR)] ? $::env(TMPDIR) : "/tmp"}] skillpilot-tcltest-[pid]] {*}$argv
file mkdir [::tcltest::configure -tmpdir]
set ::anyFailed 0
proc ::tcltest::cleanupTestsHook {} {
    variable numTests
    if {$numTests(Failed) > 0} { set ::anyFailed 1 }
}
runAllTests
file delete -force [::tcltest::configure -tmpdir]
if {[info exists ::tcltest::failFiles] && [llength $::tcltest::failFiles]} { set ::anyFailed 1 }
exit $::anyFailed
