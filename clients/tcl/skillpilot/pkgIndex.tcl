# package require skillpilot: the SkillPilot master for Tcl 8.6.
#
# It loads inside EDA shells as they are. Its files are read with Tcl's own
# open and read and evaluated at the global level, never with source, which
# OpenSTA and the Synopsys and Cadence shells redefine (OpenSTA's goes on
# after an error). Where this index itself is not read by Tcl's own source
# (OpenSTA evaluates it at the global level: no $dir, no [info script]),
# its directory is found on auto_path, as package require found it:
# DIR/skillpilot/pkgIndex.tcl. Nothing is left at the global level.
apply {{here} {
    if {$here eq ""} {
        foreach d $::auto_path {
            if {[file exists [file join $d skillpilot skillpilot.tcl]]} {
                set here [file normalize [file join $d skillpilot]]
                break
            }
        }
    }
    package ifneeded skillpilot 1.0.0 [list apply {{dir} {
        foreach f {fs.tcl json.tcl files.tcl skillpilot.tcl wait.tcl control.tcl pool.tcl} {
            set p [file join $dir $f]
            set c [open $p r]
            fconfigure $c -encoding utf-8
            set s [read $c]
            close $c
            set was [info script]
            info script $p
            try {uplevel #0 $s} finally {info script $was}
        }
        package provide skillpilot 1.0.0
    }} $here]
}} [expr {[info exists dir] ? $dir : ([info script] ne "" ? [file dirname [file normalize [info script]]] : "")}]
