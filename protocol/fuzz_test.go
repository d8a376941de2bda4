package protocol_test

import (
	"bytes"
	"errors"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/vectortest"
	"github.com/xagentkit/imv2/protocol"
)

// FuzzCardValidate: no input may panic Card.Validate, every failure is an
// invalid_packet *imv2.Error, and a Card that validates survives
// encode → DecodeCard → encode unchanged. Seeds are the Card vectors;
// run it with
//
//	go test -run '^$' -fuzz FuzzCardValidate -fuzztime 60s ./protocol/
func FuzzCardValidate(f *testing.F) {
	vectortest.Seeds(f, vectorDir, "card", "", vectortest.DataOnly)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := new(protocol.Card)
		if jsonv2.Unmarshal(data, c) != nil {
			return
		}
		if err := c.Validate(); err != nil {
			if !errors.Is(err, imv2.ErrInvalidPacket) {
				t.Fatalf("card error %v is not invalid_packet", err)
			}
			vectortest.MustBeSDKError(t, err)
			return
		}
		b, err := jsonv2.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal of a valid card: %v", err)
		}
		c2, err := protocol.DecodeCard(b)
		if err != nil {
			t.Fatalf("re-encoded card refused: %v\n%s", err, b)
		}
		b2, err := jsonv2.Marshal(c2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("unstable:\n%s\n%s (%v)", b, b2, err)
		}
	})
}
