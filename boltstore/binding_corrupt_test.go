package boltstore

import (
	"context"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2/state"
)

// TestUnbind_W6_CorruptRecordIsRemoved: a binding record that no longer
// decodes fails Binding, and Unbind removes it with its key-index entry
// (as pgstore does), reporting the key released, so the channel can be
// dropped; another channel of the key keeps it bound.
func TestUnbind_W6_CorruptRecordIsRemoved(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	for _, id := range []string{"ch_a", "ch_b"} {
		if _, err := s.Bind(ctx, state.Binding{ChannelID: id, Key: "room", State: state.BindingConnected}); err != nil {
			t.Fatal(err)
		}
	}
	corrupt := func(id string) {
		t.Helper()
		if err := s.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketBindings).Put([]byte(id), []byte(`{"key":`))
		}); err != nil {
			t.Fatal(err)
		}
	}
	corrupt("ch_a")
	if _, _, err := s.Binding(ctx, "ch_a"); err == nil {
		t.Fatal("Binding of a corrupt record: no error")
	}
	ch, err := s.Unbind(ctx, "ch_a")
	if err != nil {
		t.Fatalf("Unbind of a corrupt record: %v", err)
	}
	if !ch.Had || ch.Old.Key != "room" || ch.Released {
		t.Fatalf("Unbind of a corrupt record = %+v; want had, key room, not released (ch_b holds it)", ch)
	}
	if _, found, err := s.Binding(ctx, "ch_a"); err != nil || found {
		t.Fatalf("after Unbind: found %v, err %v", found, err)
	}
	if ids, err := s.Channels(ctx, "room"); err != nil || len(ids) != 1 || ids[0] != "ch_b" {
		t.Fatalf("Channels(room) = %v, %v; want [ch_b]", ids, err)
	}
	corrupt("ch_b")
	if ch, err := s.Unbind(ctx, "ch_b"); err != nil || !ch.Released {
		t.Fatalf("Unbind of the key's last, corrupt record = %+v, %v; want released", ch, err)
	}
}
