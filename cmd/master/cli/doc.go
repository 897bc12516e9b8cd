// Package cli is the master command line (docs/shell.md; every command,
// flag and exit code in docs/reference/master.md, generated from the verb
// table):
// Main parses the arguments, runs one command against a session or pool
// directory through packages master, launch and pool, the history tools
// (report, standin, diff) and the MCP server (mcp), and returns the exit
// code, which always comes from master.Classify on a typed error, never
// from an error's text. Command master only calls Main; tests register it
// as "master" for their scripts (testdata/script, testscript).
package cli
