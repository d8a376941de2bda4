package boltstore

import (
	"testing"
)

// TestBindingRecord_W5_OldRecordDecodes: a binding written before Data and
// Drafts existed decodes with neither; one with them keeps their bytes
// exactly (base64 in the JSON), 0x00 and invalid UTF-8 included.
func TestBindingRecord_W5_OldRecordDecodes(t *testing.T) {
	b, ok, err := decodeBinding("ch_1", []byte(`{"key":"room","display_name":"Room","state":"connected","created_ms":1790000000123}`))
	if err != nil || !ok {
		t.Fatalf("old record: %v, %v", ok, err)
	}
	if b.Key != "room" || b.Target.DisplayName != "Room" || b.Data != nil || b.Drafts != nil {
		t.Fatalf("old record decoded to %+v", b)
	}
	// "AP8=" is 0x00 0xff; "bTE=" is "m1"; "JP4=" is '$' 0xfe.
	b, ok, err = decodeBinding("ch_1", []byte(`{"key":"room","state":"revoked","created_ms":1,"data":"AP8=","drafts":[{"message_id":"bTE=","handle":"JP4="}]}`))
	if err != nil || !ok {
		t.Fatalf("new record: %v, %v", ok, err)
	}
	if string(b.Data) != "\x00\xff" || len(b.Drafts) != 1 || b.Drafts[0].MessageID != "m1" || b.Drafts[0].Handle != "$\xfe" || b.State != "revoked" {
		t.Fatalf("new record decoded to %+v", b)
	}
}
