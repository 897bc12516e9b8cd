//go:build !lean

package cli

// leanVerbs changes nothing in the full CLI (lean.go: the lean master runs
// report, standin and diff in master-history).
func leanVerbs([]verb) {}
