package boltstore

import (
	"testing"

	"github.com/xagentkit/imv2/state"
)

// FuzzDecodeBinding: a stored binding value of any bytes decodes to a
// binding that passes state.CheckBinding, or to an error; never a panic.
func FuzzDecodeBinding(f *testing.F) {
	f.Add([]byte(`{"key":"room","state":"connected","created_ms":1790000000123,"display_name":"Room"}`))
	f.Add([]byte(`{"key":"","state":"connected"}`))
	f.Add([]byte(`{"key":"a\u0000b","state":"expired"}`))
	f.Add([]byte(`{"key":"room","state":"maybe","future_field":[1,2]}`))
	f.Add([]byte(`{"key":"room","state":"revoked","data":"AP8=","drafts":[{"message_id":"bTE=","handle":""}]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, v []byte) {
		b, ok, err := decodeBinding("ch_1", v)
		if err != nil {
			return
		}
		if !ok {
			t.Fatal("a non-nil value decoded as absent")
		}
		if cerr := state.CheckBinding(b); cerr != nil {
			t.Fatalf("decoded an invalid binding %+v: %v", b, cerr)
		}
	})
}
