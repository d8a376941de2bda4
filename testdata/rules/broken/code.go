// Package fixture cites rules well (P1, M1; profile §2, Common Protocol
// §8.1 on a line of its own names no text) and badly (M15).
package fixture

import "testing"

// See PROTO §8.1, Common Protocol §99 and CP 3.0 §3. Not citations: $M0,
// A1B2, x_P9.
func TestFixture_K13_P1_Bad(t *testing.T) {
	t.Log("refused (E4)", "profile §1, §2 and §3")
}
