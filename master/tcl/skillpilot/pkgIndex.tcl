# package require skillpilot: the SkillPilot master for Tcl 8.6.
package ifneeded skillpilot 1.0.0 [list apply {{dir} {
    foreach f {fs.tcl json.tcl files.tcl skillpilot.tcl wait.tcl control.tcl pool.tcl} {
        source -encoding utf-8 [file join $dir $f]
    }
    package provide skillpilot 1.0.0
}} $dir]
