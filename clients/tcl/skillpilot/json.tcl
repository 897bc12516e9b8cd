# A small JSON reader and string writer for Tcl 8.6 (no packages), for the
# files a SkillPilot runner writes: results, state, heartbeat, replies.
#
#   skillpilot::json::parse $text     -> a Tcl value
#   skillpilot::json::string $s       -> "s" as a JSON string literal
#
# Objects become dicts, arrays lists, strings their text (every escape of
# RFC 8259 decoded: \" \\ \/ \b \f \n \r \t and \uXXXX, surrogate pairs
# included), numbers their literal text, true and false stay "true" and
# "false" (valid Tcl booleans), null becomes "". Malformed input raises an
# error with -errorcode {SKILLPILOT JSON <offset>}.

namespace eval ::skillpilot::json {}

proc ::skillpilot::json::parse {text} {
    set i 0
    set v [Value $text i]
    Ws $text i
    if {$i < [::string length $text]} {
        Fail $i "unexpected [Near $text $i] after the value"
    }
    return $v
}

proc ::skillpilot::json::Fail {i msg} {
    return -code error -level 2 -errorcode [list SKILLPILOT JSON $i] "JSON at offset $i: $msg"
}

proc ::skillpilot::json::Near {text i} {
    if {$i >= [::string length $text]} { return "end of text" }
    return "\"[::string range $text $i [expr {$i + 9}]]\""
}

# Ws skips white space. Character by character: Tcl's regexp with -start
# costs more than the short runs of blanks between tokens.
proc ::skillpilot::json::Ws {text iVar} {
    upvar 1 $iVar i
    while {[::string index $text $i] in {" " "\n" "\t" "\r"}} { incr i }
}

proc ::skillpilot::json::Value {text iVar} {
    upvar 1 $iVar i
    Ws $text i
    switch -- [::string index $text $i] {
        "\{" { return [Object $text i] }
        "\[" { return [Array $text i] }
        "\"" { return [String $text i] }
        "t" { return [Literal $text i true true] }
        "f" { return [Literal $text i false false] }
        "n" { return [Literal $text i null ""] }
        "" { Fail $i "unexpected end of text" }
    }
    # A number: the run of characters a number can hold, then the longest
    # prefix of it that is one (regexp on the short run, not at -start).
    set j $i
    while {[::string first [::string index $text $j] "0123456789+-.eE"] >= 0 && $j < [::string length $text]} { incr j }
    if {![regexp {^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?} [::string range $text $i [expr {$j - 1}]] num]} {
        Fail $i "unexpected [Near $text $i]"
    }
    incr i [::string length $num]
    return $num
}

proc ::skillpilot::json::Literal {text iVar word value} {
    upvar 1 $iVar i
    set end [expr {$i + [::string length $word] - 1}]
    if {[::string range $text $i $end] ne $word} {
        Fail $i "unexpected [Near $text $i]"
    }
    set i [expr {$end + 1}]
    return $value
}

proc ::skillpilot::json::Object {text iVar} {
    upvar 1 $iVar i
    incr i
    set d [dict create]
    while {[::string index $text $i] in {" " "\n" "\t" "\r"}} { incr i }
    if {[::string index $text $i] eq "\}"} {
        incr i
        return $d
    }
    while 1 {
        while {[::string index $text $i] in {" " "\n" "\t" "\r"}} { incr i }
        if {[::string index $text $i] ne "\""} {
            Fail $i "expected a string key, found [Near $text $i]"
        }
        set k [String $text i]
        while {[::string index $text $i] in {" " "\n" "\t" "\r"}} { incr i }
        if {[::string index $text $i] ne ":"} {
            Fail $i "expected ':', found [Near $text $i]"
        }
        incr i
        dict set d $k [Value $text i]
        while {[::string index $text $i] in {" " "\n" "\t" "\r"}} { incr i }
        switch -- [::string index $text $i] {
            "," { incr i }
            "\}" { incr i; return $d }
            default { Fail $i "expected ',' or '\}', found [Near $text $i]" }
        }
    }
}

proc ::skillpilot::json::Array {text iVar} {
    upvar 1 $iVar i
    incr i
    set l {}
    Ws $text i
    if {[::string index $text $i] eq "\]"} {
        incr i
        return $l
    }
    while 1 {
        lappend l [Value $text i]
        Ws $text i
        switch -- [::string index $text $i] {
            "," { incr i }
            "\]" { incr i; return $l }
            default { Fail $i "expected ',' or '\]', found [Near $text $i]" }
        }
    }
}

# String reads the string literal at i: its body ends at the first quote
# that follows an even number of backslashes (string first, not a regexp:
# Tcl's regexp engine is slow on the alternation a string body needs).
proc ::skillpilot::json::String {text iVar} {
    upvar 1 $iVar i
    set from [expr {$i + 1}]
    set j $from
    while 1 {
        set q [::string first \" $text $j]
        if {$q < 0} { Fail $i "unterminated string" }
        set k $q
        while {$k > $from && [::string index $text [expr {$k - 1}]] eq "\\"} { incr k -1 }
        if {($q - $k) % 2 == 0} break
        set j [expr {$q + 1}]
    }
    set i [expr {$q + 1}]
    set raw [::string range $text $from [expr {$q - 1}]]
    if {[::string first \\ $raw] < 0} {
        return $raw
    }
    return [Unescape $raw $from]
}

# Unescape decodes the escapes of a string's body. A \u escape becomes the
# character whose UTF-8 encoding it names, so the result equals what reading
# the same character unescaped from a UTF-8 file gives, in any Tcl build; a
# surrogate pair is one character, a lone surrogate U+FFFD.
proc ::skillpilot::json::Unescape {s at} {
    set out ""
    set p 0
    while {[set b [::string first \\ $s $p]] >= 0} {
        append out [::string range $s $p [expr {$b - 1}]]
        set e [::string index $s [expr {$b + 1}]]
        set p [expr {$b + 2}]
        switch -- $e {
            \" - \\ - / { append out $e }
            b { append out \b }
            f { append out \f }
            n { append out \n }
            r { append out \r }
            t { append out \t }
            u {
                set cp [Hex4 $s [expr {$b + 2}] [expr {$at + $b}]]
                set p [expr {$b + 6}]
                if {$cp >= 0xD800 && $cp <= 0xDBFF && [::string range $s $p [expr {$p + 1}]] eq "\\u"} {
                    set lo [Hex4 $s [expr {$p + 2}] [expr {$at + $p}]]
                    if {$lo >= 0xDC00 && $lo <= 0xDFFF} {
                        set cp [expr {0x10000 + (($cp - 0xD800) << 10) + ($lo - 0xDC00)}]
                        set p [expr {$p + 6}]
                    }
                }
                if {$cp >= 0xD800 && $cp <= 0xDFFF} { set cp 0xFFFD }
                append out [Char $cp]
            }
            default { Fail [expr {$at + $b}] "bad escape \\$e" }
        }
    }
    return $out[::string range $s $p end]
}

proc ::skillpilot::json::Hex4 {s from at} {
    set h [::string range $s $from [expr {$from + 3}]]
    if {![regexp {^[0-9a-fA-F]{4}$} $h]} {
        Fail $at "bad \\u escape"
    }
    return [expr {"0x$h" + 0}]
}

proc ::skillpilot::json::Char {cp} {
    if {$cp < 0x80} {
        set bytes [binary format c $cp]
    } elseif {$cp < 0x800} {
        set bytes [binary format cc [expr {0xC0 | ($cp >> 6)}] [expr {0x80 | ($cp & 0x3F)}]]
    } elseif {$cp < 0x10000} {
        set bytes [binary format ccc [expr {0xE0 | ($cp >> 12)}] [expr {0x80 | (($cp >> 6) & 0x3F)}] \
            [expr {0x80 | ($cp & 0x3F)}]]
    } else {
        set bytes [binary format cccc [expr {0xF0 | ($cp >> 18)}] [expr {0x80 | (($cp >> 12) & 0x3F)}] \
            [expr {0x80 | (($cp >> 6) & 0x3F)}] [expr {0x80 | ($cp & 0x3F)}]]
    }
    return [encoding convertfrom utf-8 $bytes]
}

# string returns s as a JSON string literal: quotes, backslashes and
# control characters escaped, everything else as is (files are UTF-8).
proc ::skillpilot::json::string {s} {
    set s [::string map {\\ \\\\ \" \\\" \n \\n \r \\r \t \\t \b \\b \f \\f} $s]
    if {[regexp {[\x00-\x1f\x7f]} $s]} {
        set out ""
        foreach ch [split $s ""] {
            scan $ch %c c
            if {$c < 0x20 || $c == 0x7f} {
                append out [format \\u%04x $c]
            } else {
                append out $ch
            }
        }
        set s $out
    }
    return "\"$s\""
}

# number returns v, the value given to the option what, as a JSON number,
# or raises USAGE ("what \"v\": why") before anything is written: the one
# way the Tcl master writes a number into a file (PROTOCOL.md section 19.1,
# "Numbers"). Tcl takes as numbers texts that JSON does not (.5, 5., 0x10,
# 010, Inf, NaN, 1e999); a file holding one is refused by the runner. type
# is "real" (seconds) or "integer"; min and max ("" for none) bound it.
#   accepted: decimal digits with an optional sign, fraction and exponent,
#     written in JSON's form (.5 -> 0.5, 5. -> 5, +3 -> 3)
#   refused: Inf, NaN, a value too large for a double (1e999), hex
#     (0x10), a leading zero (010: octal to Tcl 8.6, 10 to JSON readers),
#     booleans and anything else; for an integer, a fraction or exponent
#     and a value outside 64 bits
proc ::skillpilot::json::number {what v {type real} {min ""} {max ""}} {
    if {$type eq "integer"} {
        if {![regexp {^([+-]?)(0|[1-9][0-9]*)$} $v -> sign digits]} {
            NumberFail $what $v "not a decimal integer (no fraction, exponent, hex, leading zero or boolean)"
        }
        set out [expr {$sign eq "-" && $digits ne "0" ? "-$digits" : $digits}]
        if {![::string is wideinteger -strict $out]} {
            NumberFail $what $v "does not fit in 64 bits"
        }
        set n $out
    } else {
        if {![regexp {^([+-]?)(0|[1-9][0-9]*|)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?$} $v -> sign int frac exp]
            || ($int eq "" && $frac eq "")} {
            NumberFail $what $v "not a decimal number (JSON has no Inf, NaN, hex, leading zeros or booleans)"
        }
        set out [expr {$sign eq "-" ? "-" : ""}][expr {$int eq "" ? 0 : $int}]
        if {$frac ne ""} { append out .$frac }
        if {$exp ne ""} { append out e[::string trimleft $exp +] }
        set n [expr {double($out)}]
        if {$n in {Inf -Inf}} {
            NumberFail $what $v "too large for a double"
        }
    }
    if {$min ne "" && $n < $min} { NumberFail $what $v "must be at least $min" }
    if {$max ne "" && $n > $max} { NumberFail $what $v "must be at most $max" }
    return $out
}

proc ::skillpilot::json::NumberFail {what v why} {
    return -code error -level 2 -errorcode {SKILLPILOT USAGE} "$what \"$v\": $why"
}
