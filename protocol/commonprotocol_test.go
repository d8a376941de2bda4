package protocol_test

import (
	"strings"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

func TestAuthAck_UnsetNumbersNotSent(t *testing.T) {
	ack, err := imv2.NewPacket(protocol.TypeAuthStartAck, "cch_1", &protocol.AuthAck{Status: protocol.AuthPending})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(ack.Payload); strings.Contains(s, "expires_at") || strings.Contains(s, "poll_interval_millis") {
		t.Errorf("unset auth ack numbers are on the wire: %s", s)
	}
}
