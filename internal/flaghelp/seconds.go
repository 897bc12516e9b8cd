package flaghelp

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Seconds parses a duration flag's value written as plain seconds (30,
// 1.5), as every duration flag of master and runner takes one. ok is false
// when s is not a number at all (the caller then tries its other forms: a
// Go duration, days); a number with a leading zero (010 is 8 to Tcl, 10 to
// Go) or out of 0 to 1e9 seconds is an error.
func Seconds(s string) (d time.Duration, ok bool, err error) {
	f, perr := strconv.ParseFloat(s, 64)
	if perr != nil {
		return 0, false, nil
	}
	if t := strings.TrimLeft(s, "+-"); len(t) > 1 && t[0] == '0' && t[1] >= '0' && t[1] <= '9' {
		return 0, true, fmt.Errorf("%s: a leading zero (010 is 8 to Tcl, 10 here): write the seconds without it", s)
	}
	if !(f >= 0 && f <= 1e9) { // NaN included: it compares false.
		return 0, true, fmt.Errorf("%s seconds is out of range (0 to 1e9)", s)
	}
	return time.Duration(f * float64(time.Second)), true, nil
}
