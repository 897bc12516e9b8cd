# Every file operation of the SkillPilot Tcl master and of its pool helper
# (PROTOCOL.md sections 2, 5, 8, 16 and 21), in one namespace: no other
# proc opens, renames, deletes or lists a file.
#
# A session file is named by the session's root, a directory under it (sub:
# "queue", "ctl/ack", "" for the root itself) and a name. Tcl has no
# directory handles, so before each operation every component of sub is
# checked with [file lstat]: a component that is a symlink (or anything
# but a directory) is refused with IO_ERROR, never followed out of the
# session. The check and the operation are two steps: a directory swapped
# for a symlink in between is not caught (the Python and Go masters, which
# open relative to directory handles, have no such window).
#
# Reads check the file with [file lstat] (a regular file, within the size
# limit), open it without blocking (NONBLOCK: a FIFO planted after the
# check cannot hang the reader) and read at most the limit. Writes are
# atomic: a dot-file created with EXCL in the same directory, mode 0660
# whatever the umask, then renamed into place.
#
# This file stands alone (pool.tcl sources it when the package is not
# loaded) and leaves the host interpreter's rand() and globals alone.

namespace eval ::skillpilot::fs {
    variable fileMode 0660
    variable maxRead [expr {16 << 20}]
    variable tmpCounter 0
}

# Fail raises IO_ERROR (-errorcode {SKILLPILOT IO_ERROR}) from the caller.
proc ::skillpilot::fs::Fail {msg} {
    return -code error -level 2 -errorcode {SKILLPILOT IO_ERROR} $msg
}

# path joins root, sub and name (for messages and for the caller's eyes).
proc ::skillpilot::fs::path {root {sub ""} {name ""}} {
    set p $root
    foreach c [split $sub /] {
        if {$c ne ""} { set p [file join $p $c] }
    }
    if {$name ne ""} { set p [file join $p $name] }
    return $p
}

# Dir returns root/sub after checking that no component of sub is a
# symlink or anything but a directory (IO_ERROR). A missing component is
# not an error here: the operation that follows finds nothing.
proc ::skillpilot::fs::Dir {root sub} {
    set p $root
    foreach c [split $sub /] {
        if {$c eq ""} continue
        if {$c in {. ..}} { Fail "$root: \"$sub\" is not a session directory name" }
        set p [file join $p $c]
        if {[catch {file lstat $p st}]} { return [path $root $sub] }
        if {$st(type) eq "link"} { Fail "$p: is a symlink, refused" }
        if {$st(type) ne "directory"} { Fail "$p: is a $st(type), not a directory" }
    }
    return $p
}

# File returns root/sub/name after Dir's check of sub; name must be one
# component.
proc ::skillpilot::fs::File {root sub name} {
    if {$name eq "" || [string first / $name] >= 0 || $name in {. ..}} {
        Fail "\"$name\" is not a file name"
    }
    return [file join [Dir $root $sub] $name]
}

# urandom returns n bytes of /dev/urandom, or "" when it cannot be read.
proc ::skillpilot::fs::urandom {n} {
    if {[catch {open /dev/urandom rb} f]} { return "" }
    set b [read $f $n]
    close $f
    return $b
}

# random_hex returns n random bytes as hex: from /dev/urandom, else (no
# such device) from the clock, the pid and a counter, which is unique
# enough for temporary names. It never uses rand(), whose seed belongs to
# the host.
proc ::skillpilot::fs::random_hex {n} {
    variable tmpCounter
    set b [urandom $n]
    if {[string length $b] == $n} {
        binary scan $b H* h
        return $h
    }
    set h ""
    while {[string length $h] < 2 * $n} {
        append h [format %08x [expr {([::tcl::clock::clicks] ^ ([pid] << 16) ^ [incr tmpCounter] * 2654435761) & 0xffffffff}]]
    }
    return [string range $h 0 [expr {2 * $n - 1}]]
}

# revalidate opens root/sub (the open fails in Tcl, but the system call has
# been made): on NFS that drops the client's cached negative lookups, so a
# file another host just created becomes visible at once instead of after
# 30-60 s. Errors are ignored: the lookup that follows reports them.
proc ::skillpilot::fs::revalidate {root {sub ""}} {
    catch {close [open [Dir $root $sub] RDONLY]}
}

# is_dir: root/sub is a directory (a symlink to one counts: this only tells
# a session from another directory; every operation refuses the symlink).
proc ::skillpilot::fs::is_dir {root sub} {
    return [expr {![catch {path $root $sub} p] && [file isdirectory $p]}]
}

# is_plain_dir: root/sub is a directory and not a symlink to one.
proc ::skillpilot::fs::is_plain_dir {root sub} {
    return [expr {![catch {file lstat [path $root $sub] st}] && $st(type) eq "directory"}]
}

# mkdir creates root/sub, if missing, as a master makes a directory
# (PROTOCOL.md 19.1, "Files"; the Go master's sessionio.MkdirMaster),
# whatever the umask: a session directory masters write into (seq/ in a
# session an older runner made) gets the runner's mode for it, 0700 in a
# private session and 2770 in a group-shared one (setgid on root), since
# the runner refuses a group-writable one in a private session; any other
# (withdrawn/, affinity/) 0770, with the setgid bit of a shared parent.
# Its parent must exist. Errors are the caller's.
proc ::skillpilot::fs::mkdir {root sub} {
    set p [Dir $root $sub]
    if {![catch {file lstat $p st}]} { return } ;# There: what it is, the operations on it judge.
    file mkdir $p
    file stat [file dirname $p] parent
    set mode [expr {0770 | ($parent(mode) & 02000)}]
    if {$sub in {queue ctl seq state}} {
        file stat $root top
        set mode [expr {$top(mode) & 02000 ? 02770 : 0700}]
    }
    file attributes $p -permissions [format %#o $mode]
}

# read_file returns a regular file's content (UTF-8), or "" with found 0 when it
# (or its directory) does not exist. A symlink, FIFO or directory, a
# symlinked directory, or a file larger than the limit raises IO_ERROR: a
# session holds none where SkillPilot writes.
proc ::skillpilot::fs::read_file {root sub name {foundVar ""} {limit ""}} {
    variable maxRead
    if {$foundVar ne ""} { upvar 1 $foundVar found }
    set found 0
    if {$limit eq ""} { set limit $maxRead }
    set p [File $root $sub $name]
    if {[catch {file lstat $p st}]} { return "" }
    if {$st(type) ne "file"} {
        Fail "$p: is a $st(type), not a regular file"
    }
    if {$st(size) > $limit} {
        Fail "$p: $st(size) bytes, more than the limit of $limit"
    }
    if {[catch {open $p {RDONLY NONBLOCK}} f]} {
        if {![file exists $p]} { return "" }
        Fail "$p: $f"
    }
    fconfigure $f -encoding utf-8 -blocking 1
    set data [::read $f $limit]
    close $f
    set found 1
    return $data
}

# read_quiet returns at most limit bytes (UTF-8) of a regular file, "" on
# any error (the pool's liveness probes and result polls).
proc ::skillpilot::fs::read_quiet {root sub name {limit 1048576}} {
    if {[catch {
        set p [File $root $sub $name]
        file lstat $p st
        if {$st(type) ne "file"} { error "not a regular file" }
        set f [open $p {RDONLY NONBLOCK}]
    }]} { return "" }
    fconfigure $f -encoding utf-8 -translation binary
    set d [::read $f $limit]
    close $f
    return $d
}

# read_range returns bytes [offset, offset+length) of a file (length < 0:
# to the end), as a byte string; "" if the file does not exist yet (and
# foundVar, when given, is set to 0, else 1).
proc ::skillpilot::fs::read_range {root sub name offset {length -1} {foundVar ""}} {
    if {$foundVar ne ""} { upvar 1 $foundVar found }
    set found 0
    set p [File $root $sub $name]
    if {[catch {file lstat $p st}]} { return "" }
    if {$st(type) ne "file"} {
        Fail "$p: is a $st(type), not a regular file"
    }
    if {[catch {open $p {RDONLY NONBLOCK}} f]} { return "" }
    set found 1
    fconfigure $f -translation binary -blocking 1
    seek $f $offset
    set data [expr {$length < 0 ? [::read $f] : [::read $f $length]}]
    close $f
    return $data
}

# write_atomic replaces root/sub/name with data (UTF-8): a dot-file in the
# same directory, mode 0660 whatever the umask (group read is what the
# runner of a group-shared session needs), then rename. A directory at the
# name, or a symlink to one, is an error: [file rename] would move the file
# into it (possibly outside the session) and report success. So is a
# symlinked sub: nothing is written through it. Errors: IO_ERROR "write
# PATH: why".
proc ::skillpilot::fs::write_atomic {root sub name data} {
    variable fileMode
    set path [path $root $sub $name]
    if {[catch {
        set path [File $root $sub $name]
        set tmp [file join [file dirname $path] ".[file tail $path].[pid].[random_hex 4].tmp"]
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
        if {[info exists tmp]} { catch {file delete -- $tmp} }
        Fail "write $path: $msg"
    }
}

# create_exclusive creates an empty root/sub/name unless the name exists
# (EXCL: atomic on local filesystems and NFS v3 and v4); 1 if it created it.
proc ::skillpilot::fs::create_exclusive {root sub name} {
    variable fileMode
    set p [File $root $sub $name]
    if {[catch {open $p {WRONLY CREAT EXCL} $fileMode} f]} {
        if {[file exists $p] || ![catch {file lstat $p st}]} { return 0 }
        Fail "create $p: $f"
    }
    close $f
    catch {file attributes $p -permissions $fileMode}
    return 1
}

# link_exclusive creates root/sub/name with data unless it exists (a
# complete temporary file, hard-linked into place): 1 if this call made it.
proc ::skillpilot::fs::link_exclusive {root sub name data} {
    variable fileMode
    set path [File $root $sub $name]
    set tmp [file join [file dirname $path] ".$name.[pid].[random_hex 4].tmp"]
    set f [open $tmp {WRONLY CREAT EXCL} $fileMode]
    file attributes $tmp -permissions $fileMode ;# 0660 whatever the umask.
    puts -nonewline $f $data
    close $f
    set failed [catch {file link -hard $path $tmp}]
    file delete -- $tmp
    return [expr {!$failed}]
}

# names returns the names in root/sub matching the glob pattern ("" when
# the directory does not exist; IO_ERROR when it is a symlink).
proc ::skillpilot::fs::names {root sub pattern} {
    return [glob -nocomplain -tails -directory [Dir $root $sub] $pattern]
}

# exists: something (a symlink included) is at root/sub/name.
proc ::skillpilot::fs::exists {root sub name} {
    return [expr {![catch {file lstat [File $root $sub $name] st}]}]
}

# size returns the size of the regular file root/sub/name (lstat: never
# followed), 0 when there is none or it is not a regular file.
proc ::skillpilot::fs::size {root sub name} {
    if {[catch {file lstat [File $root $sub $name] st}] || $st(type) ne "file"} { return 0 }
    return $st(size)
}

# mtime returns root/sub/name's modification time (seconds, lstat); an
# error when it does not exist.
proc ::skillpilot::fs::mtime {root sub name} {
    file lstat [File $root $sub $name] st
    return $st(mtime)
}

# regular_mtime returns the modification time (seconds, lstat) of the
# regular file root/sub/name, "" when there is none or it is not one.
proc ::skillpilot::fs::regular_mtime {root sub name} {
    if {[catch {file lstat [File $root $sub $name] st}] || $st(type) ne "file"} { return "" }
    return $st(mtime)
}

# withdraw removes root/sub/name (a request the runner has not taken);
# errors are ignored.
proc ::skillpilot::fs::withdraw {root sub name} {
    catch {file delete -- [File $root $sub $name]}
}

# take removes root/sub/name atomically against a runner that renames the
# same entry (its claim of a queued command): exactly one of the two
# succeeds. Tcl's file delete ignores a missing file, so the entry is
# renamed (rename(2): it fails when the runner won) to a dot-file in the
# same directory, which runners skip as a master's temporary file, and
# that is deleted. Returns 1 if this call took it, 0 if it was gone
# (ENOENT); IO_ERROR otherwise.
proc ::skillpilot::fs::take {root sub name} {
    set p [File $root $sub $name]
    set tmp [file join [file dirname $p] ".$name.[pid].[random_hex 4].withdrawn.tmp"]
    if {[catch {file rename -- $p $tmp} msg opts]} {
        if {[lrange [dict get $opts -errorcode] 0 1] eq {POSIX ENOENT}} { return 0 }
        if {[catch {file lstat $p st}]} { return 0 } ;# Gone meanwhile: the runner claimed it.
        Fail "withdraw $p: $msg"
    }
    catch {file delete -- $tmp}
    return 1
}

# take_back renames root/sub/from to root/withdrawn/name (withdrawn/ made
# if missing), atomically against a runner or a pool mover that renames the
# same entry: exactly one of them succeeds. Returns 1 if this call took it,
# 0 if it was gone; IO_ERROR otherwise (a planted withdrawn/name included:
# Tcl's rename would move into a directory there).
proc ::skillpilot::fs::take_back {root sub from name} {
    set p [File $root $sub $from]
    if {[catch {file lstat $p st}]} { return 0 }
    catch {mkdir $root withdrawn}
    set target [File $root withdrawn $name]
    if {![catch {file lstat $target tst}]} { Fail "withdraw $p: $target already exists" }
    if {[catch {file rename -- $p $target} msg opts]} {
        if {[catch {file lstat $p st}]} { return 0 } ;# Gone meanwhile: the runner or a mover won.
        Fail "withdraw $p: $msg"
    }
    return 1
}

# relative returns the directory rel (e.g. "../s02" from a forward record)
# beside or below root, normalised.
proc ::skillpilot::fs::relative {root rel} {
    return [file normalize [file join $root $rel]]
}

# fs_type returns {type network} of the filesystem under dir, from
# /proc/self/mountinfo; {unknown 1} where that cannot be read (then a free
# lock proves nothing and the heartbeat alone decides, which is correct).
proc ::skillpilot::fs::fs_type {dir} {
    if {[catch {open /proc/self/mountinfo r} f]} { return {unknown 1} }
    set data [::read $f]
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
    return [::list $type $net]
}

# lock_held reports whether the runner's flock on root/sub/name is held,
# from /proc/locks (Tcl has no flock): 1 held, 0 free or no lock file, -1
# cannot tell. Used only on local filesystems, as by the Go and Python
# masters.
proc ::skillpilot::fs::lock_held {root sub name} {
    if {[catch {file lstat [File $root $sub $name] st}]} { return 0 }
    if {[catch {open /proc/locks r} f]} { return -1 }
    set data [::read $f]
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
