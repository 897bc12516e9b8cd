package suggest

import "testing"

func TestClosest(t *testing.T) {
	cmds := []string{"submit", "wait", "result", "output", "cancel", "status", "stop", "tail", "waitfor", "withdraw"}
	for _, c := range []struct{ word, want string }{
		{"sumbit", "submit"},  // a swap
		{"submt", "submit"},   // a deletion
		{"stauts", "status"},  // a swap
		{"statsu", "status"},  // a swap at the end
		{"wiat", "wait"},      // four letters, one swap
		{"waitfr", "waitfor"}, // prefix and distance 1
		{"withdr", "withdraw"},
		{"frobnicate", ""},
		{"x", ""},
		{"st", ""}, // too short to guess
		{"canel", "cancel"},
	} {
		if got := Closest(c.word, cmds); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}

func TestClosestShort(t *testing.T) {
	if got := Closest("sto", []string{"status", "stop"}); got != "stop" {
		t.Errorf("sto: %q", got)
	}
	if got := Closest("hearbeat", []string{"heartbeat", "help"}); got != "heartbeat" {
		t.Errorf("hearbeat: %q", got)
	}
	if got := Closest("sesion", []string{"session", "json"}); got != "session" {
		t.Errorf("sesion: %q", got)
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"abc", "acb", 1}, {"kitten", "sitting", 3}, {"héllo", "hello", 1}} {
		if got := distance(c.a, c.b); got != c.d {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
