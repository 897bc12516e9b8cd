// Package realtools holds the tests that drive the EDA shells a user can
// install from Debian (OpenSTA, Magic, netgen, Yosys, ngspice) under the
// runner, beside a shell that behaves as OpenSTA 2.0.17 does
// (testdata/tools/linewise.tcl): every promise tclsh keeps, kept on them
// (docs/drivers.md, "The tools tested here"). It has no code of its own.
package realtools
