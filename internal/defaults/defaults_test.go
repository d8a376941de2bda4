package defaults

import (
	"testing"
	"time"
)

func TestSet_FillsOnlyUnset(t *testing.T) {
	cases := []struct {
		in, want time.Duration
	}{{0, time.Second}, {-1, time.Second}, {2 * time.Second, 2 * time.Second}}
	for _, c := range cases {
		d := c.in
		Set(&d, time.Second)
		if d != c.want {
			t.Errorf("Set(%v) = %v, want %v", c.in, d, c.want)
		}
	}
	n := 3
	Set(&n, 9)
	if n != 3 {
		t.Errorf("Set kept %d, want 3", n)
	}
}

func TestOr_ZeroTakesTheDefault(t *testing.T) {
	if Or("", "x") != "x" || Or("y", "x") != "y" || Or(0, 5) != 5 || Or(-1, 5) != -1 {
		t.Error("Or")
	}
}
