package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/pgstore"
)

// TestAttack_FinalsFloodCannotEvictAnotherConnectorsRecord (issue 26,
// attack 2, on pgstore): over real connections, a victim xAgent's final
// is shown; then another xAgent (another connector_id) floods one and a
// half times the completed table's cap in finals, over 1 and over 5
// channels. The victim's resend of its final (its ack lost) is answered
// duplicate and the final shown once: the flood evicts its own records
// (completedshare.go). Before, the table dropped its oldest record, the
// victim's, and the resend was accepted and shown a second time.
func TestAttack_FinalsFloodCannotEvictAnotherConnectorsRecord(t *testing.T) {
	const capacity = 30
	for _, channels := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d attacker channels", channels), func(t *testing.T) {
			floodCompleted(t, capacity, channels, capacity*3/2)
		})
	}
}

// TestAttack_ManyChannelsCannotDiluteAnotherConnectorsShare (issue 26,
// on pgstore): the attacker opens twice as many channels as the completed
// table's cap and sends one final on each. The Channel puts its
// connector_id on its store calls' contexts, and the shares are per
// connector_id first: the victim's connector_id keeps half the table, and
// its resend is answered duplicate, shown once. With shares per channel
// only (schema 6), 61 channels made every share 0 and the victim's record
// went with the flood: the resend was accepted and shown again.
func TestAttack_ManyChannelsCannotDiluteAnotherConnectorsShare(t *testing.T) {
	const capacity = 30
	floodCompleted(t, capacity, 2*capacity, 2*capacity)
}

// floodCompleted shows a victim's final, floods finals from another
// xAgent over channels channels, and checks that the victim's resend is
// a duplicate, shown once.
func floodCompleted(t *testing.T, capacity, channels, finals int) {
	ctx := context.Background()
	st := openStore(t, srv.NewDatabase(t), pgstore.Options{CompletedCap: capacity})
	plat := newKeyPlatform(false)
	srv, err := dataplane.NewServer(dataplane.ServerConfig{
		Card:      consolebridge.Card(),
		NewTarget: func(string) imv2.Target { return plat },
		Options:   &imv2.Options{Pending: st.Pending(), Completed: st.Completed()},
		Registry:  st,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /connector-card.json", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(consolebridge.Card())
	})
	mux.Handle("/ws", srv)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); _ = srv.Close() })

	send := func(x *dataplane.Client, ch, id string) imv2.AckStatus {
		t.Helper()
		d, err := x.Send(ctx, ch, imv2.ChatMessage{MessageID: id, Text: "x"})
		if err != nil {
			t.Fatal(err)
		}
		status, err := d.Wait(ctx)
		if err != nil {
			t.Fatalf("final %s: %v", id, err)
		}
		return status
	}
	nop := newKeyPlatform(false)
	victim := xagent(t, hs.URL, nop)
	vch, err := victim.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := send(victim, vch, "v1"); s != imv2.AckAccepted {
		t.Fatalf("the victim's final: %s", s)
	}

	attacker := xagent(t, hs.URL, nop)
	ids := make([]string, channels)
	for i := range ids {
		ch, err := attacker.OpenChannel(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = ch
	}
	for i := range finals {
		if s := send(attacker, ids[i%channels], fmt.Sprintf("a%d", i)); s != imv2.AckAccepted {
			t.Fatalf("flood final %d: %s", i, s)
		}
	}

	if s := send(victim, vch, "v1"); s != imv2.AckDuplicate { // the resend
		t.Errorf("the victim's resend: %s, want duplicate", s)
	}
	if n := plat.count("v1"); n != 1 {
		t.Errorf("the victim's final shown %d times, want once", n)
	}
}
