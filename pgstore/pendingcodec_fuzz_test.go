package pgstore

import (
	"bytes"
	"encoding/gob"
	"reflect"
	"testing"

	"github.com/xagentkit/imv2"
)

// FuzzDecodePending: a message column of any bytes is an entry or an
// error, never a panic; an entry read in the current encoding writes back
// to bytes that read the same.
func FuzzDecodePending(f *testing.F) {
	e := imv2.PendingEntry{ChannelID: "ch", Message: imv2.ChatMessage{MessageID: "m", Text: "hi", Files: []imv2.File{{Type: imv2.FileImage, FileRef: "r"}}}}
	f.Add(appendPending(nil, &e))
	var g bytes.Buffer
	if err := gob.NewEncoder(&g).Encode(&e.Message); err != nil {
		f.Fatal(err)
	}
	f.Add(g.Bytes())
	f.Add([]byte{})
	f.Add([]byte{codecMark})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodePending("ch", 0, 0, b)
		if err != nil || len(b) == 0 || b[0] != codecMark {
			return
		}
		again, err := decodePending("ch", 0, 0, appendPending(nil, &got))
		if err != nil || !reflect.DeepEqual(again, got) || got.ChannelID != "ch" {
			t.Fatalf("decoded %+v from %x does not round trip: %+v, %v", got, b, again, err)
		}
	})
}
