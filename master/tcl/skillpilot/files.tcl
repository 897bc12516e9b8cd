# File primitives of the SkillPilot Tcl master (PROTOCOL.md sections 2, 5,
# 8 and 16): ids, atomic writes with mode 0660, bounded reads that refuse
# symlinks and FIFOs, seq allocation by exclusive create, NFS directory
# revalidation, and the liveness probes. Nothing here touches the host
# interpreter's rand() or its global state.

namespace eval ::skillpilot {
    variable seqWidth 10
    variable fileMode 0660
    variable maxRead [expr {16 << 20}]
    variable tmpCounter 0
}

# Throw raises a SkillPilot error from the caller: -errorcode {SKILLPILOT
# CODE ...}. CODE is one of the names in exitcode.
proc ::skillpilot::Throw {code msg args} {
    return -code error -level 2 -errorcode [list SKILLPILOT $code {*}$args] $msg
}

# RandomHex returns n random bytes as hex: from /dev/urandom, else (no such
# device) from the clock, the pid and a counter, which is unique enough for
# temporary names. It never uses rand(), whose seed belongs to the host.
proc ::skillpilot::RandomHex {n} {
    variable tmpCounter
    if {![catch {open /dev/urandom rb} f]} {
        set b [read $f $n]
        close $f
        if {[string length $b] == $n} {
            binary scan $b H* h
            return $h
        }
    }
    set h ""
    while {[string length $h] < 2 * $n} {
        append h [format %08x [expr {([clock clicks] ^ ([pid] << 16) ^ [incr tmpCounter] * 2654435761) & 0xffffffff}]]
    }
    return [string range $h 0 [expr {2 * $n - 1}]]
}

# new_id returns a UUID version 7: 48 bits of Unix milliseconds, then
# random bits, so that ids sort by creation time.
proc ::skillpilot::new_id {} {
    set r [RandomHex 10]
    set h [format %012llx [clock milliseconds]]
    append h 7 [string range $r 0 2]
    append h [format %x [expr {0x8 | ("0x[string index $r 3]" & 0x3)}]] [string range $r 4 18]
    return "[string range $h 0 7]-[string range $h 8 11]-[string range $h 12 15]-[string range $h 16 19]-[string range $h 20 31]"
}

proc ::skillpilot::valid_id {id} {
    return [expr {[regexp {^[A-Za-z0-9._-]{1,128}$} $id] && $id ni {. ..}}]
}

# parse_name returns {seq id} of cmd_<seq>_<id>.json (prefix cmd) or
# req_<seq>_<id>.json, or "" for any other name. The id is matched whole:
# cmd_1_a_b.json has the id a_b, never b.
proc ::skillpilot::parse_name {name {prefix cmd}} {
    if {![regexp "^${prefix}_(\[0-9\]{1,18})_(.+)\\.json\$" $name -> seq id] || ![valid_id $id]} {
        return ""
    }
    return [list [scan $seq %lld] $id]
}

proc ::skillpilot::now_iso {} {
    set ms [clock milliseconds]
    return "[clock format [expr {$ms / 1000}] -format %Y-%m-%dT%H:%M:%S -gmt 1].[format %03d [expr {$ms % 1000}]]Z"
}

# revalidate opens a directory (the open fails in Tcl, but the system call
# has been made): on NFS that drops the client's cached negative lookups,
# so a file another host just created becomes visible at once instead of
# after 30-60 s.
proc ::skillpilot::revalidate {dir} {
    catch {close [open $dir r]}
}

# write_atomic replaces path with data (UTF-8): a dot-file in the same
# directory, mode 0660 whatever the umask (group read is what the runner of
# a group-shared session needs), then rename. A directory at path, or a
# symlink to one, is an error: [file rename] would move the file into it
# (possibly outside the session) and report success.
proc ::skillpilot::write_atomic {path data} {
    variable fileMode
    set tmp [file join [file dirname $path] ".[file tail $path].[pid].[RandomHex 4].tmp"]
    if {[catch {
        if {[file isdirectory $path]} {
            error "$path is a directory (or a link to one): remove it"
        }
        set f [open $tmp {WRONLY CREAT EXCL} $fileMode]
        file attributes $tmp -permissions $fileMode
        fconfigure $f -encoding utf-8 -translation lf
        puts -nonewline $f $data
        close $f
        file rename -force -- $tmp $path
        if {[file isdirectory $path]} { ;# It became one meanwhile.
            catch {file delete -- [file join $path [file tail $tmp]]}
            error "$path is a directory (or a link to one): remove it"
        }
    } msg]} {
        catch {close $f}
        catch {file delete -- $tmp}
        Throw IO_ERROR "write $path: $msg"
    }
}

# create_exclusive creates an empty file unless the name exists (O_EXCL:
# atomic on local filesystems and NFS v3 and v4); 1 if it created it.
proc ::skillpilot::create_exclusive {path} {
    variable fileMode
    if {[catch {open $path {WRONLY CREAT EXCL} $fileMode} f]} {
        if {[file exists $path] || [file type $path] ne ""} { return 0 }
        Throw IO_ERROR "create $path: $f"
    }
    close $f
    catch {file attributes $path -permissions $fileMode}
    return 1
}

# read_file returns a regular file's content (UTF-8), or "" with found 0
# when it does not exist. A symlink, FIFO or directory, or a file larger than
# the limit, raises IO_ERROR: a session holds none where SkillPilot writes.
proc ::skillpilot::read_file {path {foundVar ""} {limit ""}} {
    variable maxRead
    if {$foundVar ne ""} { upvar 1 $foundVar found }
    set found 0
    if {$limit eq ""} { set limit $maxRead }
    if {[catch {file lstat $path st}]} { return "" }
    if {$st(type) ne "file"} {
        Throw IO_ERROR "$path: is a $st(type), not a regular file"
    }
    if {$st(size) > $limit} {
        Throw IO_ERROR "$path: $st(size) bytes, more than the limit of $limit"
    }
    if {[catch {open $path {RDONLY NONBLOCK}} f]} {
        if {![file exists $path]} { return "" }
        Throw IO_ERROR "$path: $f"
    }
    fconfigure $f -encoding utf-8 -blocking 1
    set data [read $f $limit]
    close $f
    set found 1
    return $data
}

# read_range returns bytes [offset, offset+length) of a file (length < 0:
# to the end), as a byte string; "" if the file does not exist yet.
proc ::skillpilot::read_range {path offset {length -1}} {
    if {[catch {file lstat $path st}]} { return "" }
    if {$st(type) ne "file"} {
        Throw IO_ERROR "$path: is a $st(type), not a regular file"
    }
    if {[catch {open $path {RDONLY NONBLOCK}} f]} { return "" }
    fconfigure $f -translation binary -blocking 1
    seek $f $offset
    set data [expr {$length < 0 ? [read $f] : [read $f $length]}]
    close $f
    return $data
}

# read_json parses a JSON file; "" if it does not exist. With quiet, any
# error also gives "" (for liveness probes).
proc ::skillpilot::read_json {path {quiet 0}} {
    if {[catch {
        set text [read_file $path found]
        set v [expr {$found ? [json::parse $text] : ""}]
    } msg opts]} {
        if {$quiet} { return "" }
        if {[lindex [dict get $opts -errorcode] 1] eq "JSON"} {
            Throw IO_ERROR "$path: not valid JSON: $msg"
        }
        return -options $opts $msg
    }
    return $v
}

proc ::skillpilot::MaxReserved {dir} {
    set m 0
    foreach f [glob -nocomplain -tails -directory [file join $dir seq] {[0-9]*}] {
        if {[regexp {^[0-9]{1,18}$} $f] && [scan $f %lld] > $m} { set m [scan $f %lld] }
    }
    return $m
}

proc ::skillpilot::ReadHint {dir} {
    if {[catch {read_file [file join $dir seq hint] found 64} txt] || !$found} { return -1 }
    set txt [string trim $txt]
    if {![regexp {^[0-9]{1,18}$} $txt]} { return -1 }
    return [scan $txt %lld]
}

# alloc_seq reserves the next seq of the session (PROTOCOL.md section 5):
# exclusive create of seq/<n>, the same scheme as every SkillPilot master.
proc ::skillpilot::alloc_seq {dir} {
    variable seqWidth
    set n [ReadHint $dir]
    if {$n < 0} { set n [MaxReserved $dir] }
    set tries 0
    while 1 {
        incr n
        if {[create_exclusive [file join $dir seq [format %0*lld $seqWidth $n]]]} { break }
        if {[incr tries] % 64 == 0} {
            set m [MaxReserved $dir]
            if {$m > $n} { set n $m }
        }
    }
    if {[ReadHint $dir] < $n} {
        catch {write_atomic [file join $dir seq hint] "$n\n"}
    }
    return $n
}

# fs_type returns {type network} of the filesystem under dir, from
# /proc/self/mountinfo; {unknown 1} where that cannot be read (then a free
# lock proves nothing and the heartbeat alone decides, which is correct).
proc ::skillpilot::fs_type {dir} {
    if {[catch {open /proc/self/mountinfo r} f]} { return {unknown 1} }
    set data [read $f]
    close $f
    set real [file normalize $dir]
    set best ""
    set type unknown
    foreach line [split $data \n] {
        set sep [string first " - " $line]
        if {$sep < 0} { continue }
        set fields [split [string range $line 0 [expr {$sep - 1}]] " "]
        if {[llength $fields] < 5} { continue }
        set mnt [subst -nocommands -novariables [lindex $fields 4]]
        set prefix [string trimright $mnt /]/
        if {($real eq $mnt || [string first $prefix $real/] == 0) && [string length $mnt] >= [string length $best]} {
            set best $mnt
            set type [lindex [split [string range $line [expr {$sep + 3}] end] " "] 0]
        }
    }
    if {$best eq ""} { return {unknown 1} }
    set net [expr {[string match nfs* $type] || [string match fuse* $type] ||
                   $type in {cifs smb smb2 smb3 smbfs 9p ceph lustre gpfs afs coda}}]
    return [list $type $net]
}

# lock_held reports whether the runner's flock on path is held, from
# /proc/locks (Tcl has no flock): 1 held, 0 free or no lock file, -1 cannot
# tell. Used only on local filesystems, as by the Go and Python masters.
proc ::skillpilot::lock_held {path} {
    if {[catch {file lstat $path st}]} { return 0 }
    if {[catch {open /proc/locks r} f]} { return -1 }
    set data [read $f]
    close $f
    set dev $st(dev)
    set major [expr {(($dev >> 8) & 0xfff) | (($dev >> 32) & ~0xfff)}]
    set minor [expr {($dev & 0xff) | (($dev >> 12) & ~0xff)}]
    set want [format %02x:%02x:%s $major $minor $st(ino)]
    foreach line [split $data \n] {
        if {[lindex $line 1] eq "FLOCK" && [lindex $line 5] eq $want} { return 1 }
        if {[lindex $line 1] eq "->" && [lindex $line 2] eq "FLOCK" && [lindex $line 6] eq $want} { return 1 }
    }
    return 0
}
