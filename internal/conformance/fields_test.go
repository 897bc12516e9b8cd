package conformance

import "testing"

func TestFieldsMatch(t *testing.T) {
	ev := map[string]any{
		"event":       "cmd_begin",
		"cmd_id":      "k",
		"spool_start": float64(40),
		"detail":      map[string]any{"kind": "tcl"},
	}
	for _, c := range []struct {
		exps []string
		want bool
	}{
		{[]string{"cmd_id=k", "kind=tcl"}, true},
		{[]string{"cmd_id=j"}, false},
		{[]string{"kind~=cl"}, true},
		{[]string{"spool_start>=38"}, true},
		{[]string{"spool_start>=40"}, true},
		{[]string{"spool_start>=41"}, false},
		{[]string{"spool_start>=x"}, false},
		{[]string{"cmd_id>=1"}, false},
		{[]string{"missing=1"}, false},
		{[]string{"spool_start=40"}, true},
	} {
		if got := fieldsMatch(ev, c.exps); got != c.want {
			t.Errorf("fieldsMatch(%v) = %v, want %v", c.exps, got, c.want)
		}
	}
}
