package runnercli

import (
	"strings"
	"testing"
	"time"
)

func TestParseKeepDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true},
		{"2w", 14 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"0", 0, true},
		{"1.5d", 36 * time.Hour, true},
		{"", 0, true},
		{"d", 0, false},
		{"-1d", 0, false},
		{"7days", 0, false},
		{"2d3w", 0, false},
		{"999999999999d", 0, false}, // Too long: was "is negative" (an overflow).
		{"107000d", 0, false},
		{"100000d", 100000 * 24 * time.Hour, true},
		{"100000d2562047h", 0, false},
		{"NaNd", 0, false},
	} {
		got, err := parseKeepDuration(c.in)
		if err != nil && strings.Contains(err.Error(), "negative") && !strings.HasPrefix(c.in, "-") {
			t.Errorf("parseKeepDuration(%q): %v", c.in, err)
		}
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseKeepDuration(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true},
		{"64MiB", 64 << 20, true},
		{"64M", 64 << 20, true},
		{"64MB", 64 << 20, true},
		{"1GiB", 1 << 30, true},
		{"512KB", 512 << 10, true},
		{"1.5G", 3 << 29, true},
		{"0", 0, true},
		{"MiB", 0, false},
		{"10X", 0, false},
		{"-1M", 0, false},
		{"9999999999999999999", 0, false}, // Too large: was "must not be negative" (an overflow).
		{"8388608T", 0, false},
		{"NaN", 0, false},
	} {
		got, err := parseByteSize(c.in)
		if err != nil && strings.Contains(err.Error(), "negative") {
			t.Errorf("parseByteSize(%q): %v", c.in, err)
		}
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseByteSize(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

// The runner's duration flags take what master's take (plain seconds, Go
// durations) and days: `runner --default-timeout 600` said only "parse
// error" before.
func TestRunDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"600", 600 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"0", 0, true},
		{"2m", 2 * time.Minute, true},
		{"1d", 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"010", 0, false},
		{"-5", 0, false},
		{"1x", 0, false},
		{"", 0, false},
	} {
		var d runDuration
		err := d.Set(tc.in)
		if (err == nil) != tc.ok || tc.ok && time.Duration(d) != tc.want {
			t.Errorf("Set(%q) = %v, %v; want %v, ok %v", tc.in, time.Duration(d), err, tc.want, tc.ok)
		}
	}
}
