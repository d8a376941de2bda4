package dataplane

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
)

// TestAttack_FinalsFloodCannotEvictAnotherChannelsRecord (issue 26,
// attack 2): a victim's final is shown and its ack lost; then another
// connector_id floods one and a half times the completed store's capacity
// in tiny finals, over 1 and over 20 channels. The victim's resend is
// still answered duplicate and the final shown once: the flood evicts the
// attacker's own records, never a record of a channel within its share
// younger than the resend horizon (completedshare.go). Before, the store
// dropped its oldest record, the victim's, and the resend was accepted
// and shown a second time. The store is sized 100 here; the mechanism is
// the one DefaultCompletedCap (100,000) runs. The same over boltstore
// (before its layout 2 it evicted oldest first too; pgstore's test is
// TestAttack_FinalsFloodCannotEvictAnotherConnectorsRecord).
func TestAttack_FinalsFloodCannotEvictAnotherChannelsRecord(t *testing.T) {
	const capacity = 100
	for name, newStore := range completedStores(capacity) {
		for _, channels := range []int{1, 20} {
			t.Run(name+"/"+strconv.Itoa(channels)+" attacker channels", func(t *testing.T) {
				floodCompleted(t, newStore, capacity, channels)
			})
		}
	}
}

// completedStores are the completed stores of capacity records the
// attacks run on, each on the test's clock.
func completedStores(capacity int) map[string]func(t *testing.T, clk clock.Clock) imv2.CompletedStore {
	return map[string]func(t *testing.T, clk clock.Clock) imv2.CompletedStore{
		"memory": func(_ *testing.T, clk clock.Clock) imv2.CompletedStore {
			return imv2.NewMemoryCompletedStore(capacity, 0, clk)
		},
		"boltstore": func(t *testing.T, clk clock.Clock) imv2.CompletedStore {
			st, err := boltstore.Open(filepath.Join(t.TempDir(), "imv2.db"), boltstore.Options{CompletedCap: capacity, Clock: clk})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st.Completed()
		},
	}
}

func floodCompleted(t *testing.T, newStore func(*testing.T, clock.Clock) imv2.CompletedStore, capacity, channels int) {
	victimResendAfter(t, newStore, func(attacker *peer) {
		ids := make([]string, channels)
		for i := range ids {
			ids[i], _ = attacker.open("")
		}
		for i := range capacity * 3 / 2 {
			attacker.write(finalMessage(ids[i%channels], "a"+strconv.Itoa(i), "x"))
			require.Equal(t, imv2.AckAccepted, mustAck(t, attacker.next()).Status, "final %d", i)
		}
	})
}

// victimResendAfter is the frame of the completed-store attacks: a
// victim's final is shown and its ack lost; another connector_id
// (attacker, said hello) attacks; a minute later, well inside the resend
// horizon, the victim's resend is answered duplicate and the final was
// shown once.
func victimResendAfter(t *testing.T, newStore func(*testing.T, clock.Clock) imv2.CompletedStore, attack func(attacker *peer)) {
	t.Helper()
	clk := fakeclock.New(time.Unix(1_700_000_000, 0))
	target := newRecTarget()
	_, url := startServer(t, func(c *ServerConfig) {
		c.APIKey = attackKey
		c.NewTarget = func(string) imv2.Target { return target }
		c.Options = &imv2.Options{Completed: newStore(t, clk)}
	})
	victim := dialPeer(t, url, authHeader())
	victim.hello("")
	vch, _ := victim.open("")
	victim.write(finalMessage(vch, "v1", "shown once"))
	require.Equal(t, imv2.AckAccepted, mustAck(t, victim.next()).Status) // the ack the sender will miss

	attacker := dialPeer(t, url, authHeader())
	attacker.hello("")
	attack(attacker)
	clk.Advance(time.Minute)

	victim.write(finalMessage(vch, "v1", "shown once")) // the resend
	require.Equal(t, imv2.AckDuplicate, mustAck(t, victim.next()).Status)
	require.Equal(t, 1, target.count("v1"), "shown once")
}

// TestAttack_ManyChannelsCannotDiluteAnotherConnectorsShare (issue 26):
// the attacker opens 200 channels and sends one tiny final on each, twice
// the capacity of a memory completed store of 100. The Server gives each
// Channel its connector_id (imv2.Options.ConnectorID), so the store's
// shares are per connector_id first: the victim's connector_id keeps half
// the store, and its resend is answered duplicate, shown once. With
// shares per channel only, 201 channels made every share 0 and the
// victim's record went with the flood. The same over boltstore, which
// reads the connector_id from the Record's context (before its layout 3
// it shared per channel only, and the resend was accepted).
func TestAttack_ManyChannelsCannotDiluteAnotherConnectorsShare(t *testing.T) {
	const capacity = 100
	for name, newStore := range completedStores(capacity) {
		t.Run(name, func(t *testing.T) { diluteCompleted(t, newStore, capacity) })
	}
}

func diluteCompleted(t *testing.T, newStore func(*testing.T, clock.Clock) imv2.CompletedStore, capacity int) {
	victimResendAfter(t, newStore, func(attacker *peer) {
		for i := range 2 * capacity {
			ch, _ := attacker.open("")
			attacker.write(finalMessage(ch, "a"+strconv.Itoa(i), "x"))
			require.Equal(t, imv2.AckAccepted, mustAck(t, attacker.next()).Status, "final %d", i)
		}
	})
}
