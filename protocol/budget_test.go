package protocol

import (
	"strings"
	"testing"
)

// max_output_bytes is validated: negative, fractional, out of range or not
// a number is invalid, naming the field; a valid one overrides the
// runner's default.
func TestOutputBudgetValidated(t *testing.T) {
	for _, v := range []string{`-1`, `1.5`, `"10"`, `1e30`} {
		raw := `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"puts x","max_output_bytes":` + v + `}`
		_, err := ParseCommand(CommandName(1, "a"), []byte(raw))
		if err == nil || !strings.Contains(err.Error(), "max_output_bytes") {
			t.Errorf("max_output_bytes %s: %v", v, err)
		}
	}
	raw := `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"puts x","max_output_bytes":4096}`
	if c, err := ParseCommand(CommandName(1, "a"), []byte(raw)); err != nil || c.OutputBudget(7) != 4096 {
		t.Errorf("%v %v", c, err)
	}
	raw = `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"puts x"}`
	if c, err := ParseCommand(CommandName(1, "a"), []byte(raw)); err != nil || c.OutputBudget(7) != 7 {
		t.Errorf("%v %v", c, err)
	}
}
