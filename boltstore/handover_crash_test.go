package boltstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
)

// killedBeforeRecord is the process killed between PostMessage and
// Record: the post happened, the record never reaches the file.
type killedBeforeRecord struct{ imv2.ClaimStore }

func (killedBeforeRecord) Record(context.Context, string, string, imv2.Fingerprint) error {
	return errors.New("killed")
}

// TestChannel_S8_KillBeforeRecordThenNewChannelIDShowsFinalOnce is the
// interleaving of a durable store with the dataplane's default memory
// registry: a final is posted and the process killed before its Record;
// after the restart the reopen of the channel gets a new ID and the
// completed store a Handover; the resend under the new ID must find the
// orphaned claim, and a Target without dedup or check must not post it
// again (it is rejected delivery_outcome_unknown, not retryable).
func TestChannel_S8_KillBeforeRecordThenNewChannelIDShowsFinalOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	var posts atomic.Int32
	target := imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error {
		posts.Add(1)
		return nil
	})
	deliver := func(st *boltstore.Store, completed imv2.CompletedStore, channelID string) *imv2.ChatMessageAck {
		t.Helper()
		out := &sink{pkts: make(chan *imv2.Packet, 8)}
		ch, err := imv2.NewChannel(channelID, imv2.RoleConnector, neg, out, target, &imv2.Options{Pending: st.Pending(), Completed: completed})
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		p, err := imv2.NewChatMessage(channelID, imv2.ToConnector, imv2.ChatMessage{MessageID: "f1", Text: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Receive(ctx, p); err != nil {
			t.Fatal(err)
		}
		a, err := imv2.DecodeChatMessageAck(out.next(t))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deliver(st, killedBeforeRecord{st}, "cch_old") // its ack never leaves: the process is dead
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Handover(ctx, "cch_old", "cch_new"); err != nil { // the reopen got a new ID
		t.Fatal(err)
	}
	a := deliver(st, st, "cch_new")
	if n := posts.Load(); n != 1 {
		t.Fatalf("S8: the final was posted %d times (resend answered %s %s), want once", n, a.Status, a.Code)
	}
	if a.Status != imv2.AckRejected || a.Code != imv2.CodeDeliveryOutcomeUnknown || a.Retryable {
		t.Fatalf("resend answered %s %s retryable=%v; want rejected %s, not retryable", a.Status, a.Code, a.Retryable, imv2.CodeDeliveryOutcomeUnknown)
	}
}
