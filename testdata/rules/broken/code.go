// Package fixture cites well: P1, M1, profile §2, Profile §1, Common
// Protocol 3.0 §8.2 (a section broken over a line names no text).
// And badly: M15.
package fixture

import "testing"

// See PROTO §8.1, Common Protocol §99 and CP 3.0 §3. Not citations: $M0,
// A1B2, x_P9.
func TestFixture_K13_P1_Bad(t *testing.T) {
	t.Log("refused (E4)", "profile §1, §2 and §3", "Common Protocol 3.0 §8.1–§8.2")
}
