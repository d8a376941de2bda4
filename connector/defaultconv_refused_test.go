package connector

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
)

// TestKit_W5_RefusedDefaultBindingDropsTheChannel: when a new channel's
// default conversation cannot be bound (here an invalid, empty key), its
// channel.open is answered connector_channel_unavailable (the packet was
// fine), and the new channel is dropped at once: it holds no slot in the
// Server and its ID is forgotten, so refused opens evict no real channel.
func TestKit_W5_RefusedDefaultBindingDropsTheChannel(t *testing.T) {
	var mu sync.Mutex
	var tried []string
	store := newMemoryStore(fakeclock.New(time.Unix(0, 0)))
	k, _ := newUnit(t, &editor{}, false, Options{Store: store, DefaultConversation: func(ch string) string {
		if !strings.HasPrefix(ch, "cch_") {
			return DefaultConversationKey // newUnit's own ch_1 and ch_2
		}
		mu.Lock()
		defer mu.Unlock()
		tried = append(tried, ch)
		return "" // not a valid key
	}})
	x := connectPipe(t, k)
	ans := x.call(protocol.TypeConnectorHello, "", protocol.ConnectorHello{ConnectorCardID: "im.unit",
		ProtocolVersion: protocol.ProtocolVersion, SupportedProfiles: []string{imv2.ProfileIMv2}})
	if ans.Type != protocol.TypeConnectorHelloAck {
		t.Fatalf("hello answered %s %+v", ans.Type, ans.Error)
	}
	for i := 0; i < 3; i++ {
		ans := x.call(protocol.TypeChannelOpen, "", nil)
		if ans.Error == nil || ans.Error.Code != imv2.CodeChannelUnavailable {
			t.Fatalf("open #%d answered %s %+v; want %s", i, ans.Type, ans.Error, imv2.CodeChannelUnavailable)
		}
	}
	if ids := k.Server().ChannelIDs(); len(ids) != 0 { // ch_1 and ch_2 are only bound, never opened
		t.Errorf("refused channels still held: %v", ids)
	}
	x.close()
	k.Close() // waits for the drops
	mu.Lock()
	defer mu.Unlock()
	if len(tried) != 3 {
		t.Fatalf("default conversation asked for %d channels; want 3", len(tried))
	}
	for _, id := range tried {
		if known, err := store.Known(context.Background(), id); err != nil || known {
			t.Errorf("refused channel %s still registered (%v, %v)", id, known, err)
		}
	}
}
