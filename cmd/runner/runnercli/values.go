package runnercli

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/internal/flaghelp"
)

// keepDuration is a flag value for a retention age: a Go duration (36h,
// 90m) or whole days and weeks (7d, 2w), which is how retention is said.
type keepDuration time.Duration

func (d *keepDuration) String() string {
	if d == nil || *d == 0 {
		return "0"
	}
	v := time.Duration(*d)
	if v%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(v/(24*time.Hour)), 10) + "d"
	}
	return v.String()
}

func (d *keepDuration) Set(s string) error {
	v, err := parseKeepDuration(s)
	if err != nil {
		return err
	}
	*d = keepDuration(v)
	return nil
}

// runDuration is a flag value for the runner's other durations: a Go
// duration (1.5s, 2m), plain seconds (600), or days and weeks (1d), as
// master's duration flags and --keep-results take them.
type runDuration time.Duration

func (d *runDuration) String() string {
	if d == nil {
		return "0s"
	}
	return time.Duration(*d).String()
}

func (d *runDuration) Set(s string) error {
	if v, ok, err := flaghelp.Seconds(s); ok {
		if err == nil {
			*d = runDuration(v)
		}
		return err
	}
	v, err := parseKeepDuration(s)
	if err != nil || strings.TrimSpace(s) == "" {
		return fmt.Errorf("%q is not a duration: use seconds (30), a Go duration (1.5s, 2m, 1h) or days (1d)", s)
	}
	*d = runDuration(v)
	return nil
}

// durationVar defines a duration flag that takes what runDuration takes.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*runDuration)(p), name, usage+" (a `duration` such as 1.5s or 2m, or plain seconds)")
}

// parseKeepDuration parses 7d, 2w, 1d12h, or any Go duration.
func parseKeepDuration(s string) (time.Duration, error) {
	var total time.Duration
	rest := strings.TrimSpace(s)
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}} {
		i := strings.Index(rest, u.suffix)
		if i < 0 {
			continue
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil || !(n >= 0) {
			return 0, fmt.Errorf("%q is not a duration (7d, 36h, 90m)", s)
		}
		f := n * float64(u.unit)
		if f >= float64(math.MaxInt64-total) {
			return 0, fmt.Errorf("%q is too long (at most about 290 years)", s)
		}
		total += time.Duration(f)
		rest = rest[i+1:]
	}
	if rest != "" {
		v, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (7d, 36h, 90m)", s)
		}
		if v > 0 && v > math.MaxInt64-total {
			return 0, fmt.Errorf("%q is too long (at most about 290 years)", s)
		}
		total += v
	}
	if total < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return total, nil
}

// byteSize is a flag value for a size in bytes: a number, with K, M, G, T
// (powers of 1024, with or without "iB" or "B") after it.
type byteSize int64

func (b *byteSize) String() string {
	if b == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Set(s string) error {
	v, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(v)
	return nil
}

// parseByteSize parses 1048576, 64MiB, 64M, 1GiB, 512KB (K, M, G, T are
// powers of 1024 either way).
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRight(t, "KMGTkmgtiBb")
	unit := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(t[len(num):], "B"), "b"))
	unit = strings.TrimSuffix(unit, "I")
	mult := map[string]int64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit]
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || mult == 0 || !(n >= 0) {
		return 0, fmt.Errorf("%q is not a size in bytes (1048576, 64MiB, 1GiB)", s)
	}
	f := n * float64(mult)
	if f >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large (at most 8 EiB)", s)
	}
	return int64(f), nil
}
