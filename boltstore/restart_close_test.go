package boltstore_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
)

// TestChannel_S8_RecordSurvivesCloseDuringDelivery: a Connector shuts
// down while the Target is posting a final. The Target finishes the post
// (the side effect happened) and returns nil after Channel.Close cancelled
// the channel's context. The completed record must still be written, or
// the final's resend after the restart is posted a second time (boltstore
// refuses a cancelled context, so the record must not use the channel's).
// Found by the reliability work.
func TestChannel_S8_RecordSurvivesCloseDuringDelivery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	var posts atomic.Int32
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	target := imv2.TargetFunc(func(ctx context.Context, _ string, _ *imv2.ChatMessage) error {
		if posts.Add(1) == 1 {
			entered <- struct{}{}
			<-ctx.Done() // the platform call completes as the shutdown begins
			<-release
		}
		return nil
	})
	final, err := imv2.NewChatMessage("cch_1", imv2.ToConnector, imv2.ChatMessage{MessageID: "f1", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}

	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := imv2.NewChannel("cch_1", imv2.RoleConnector, neg, &sink{pkts: make(chan *imv2.Packet, 8)}, target, &imv2.Options{Pending: st.Pending(), Completed: st.Completed()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Receive(context.Background(), final); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("Target not called")
	}
	closed := make(chan struct{})
	go func() { _ = ch.Close(); close(closed) }()
	time.Sleep(10 * time.Millisecond) // let Close cancel the context
	close(release)
	<-closed
	st.Close()

	// Restart: the same final arrives again (its ack was never sent).
	st, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := &sink{pkts: make(chan *imv2.Packet, 8)}
	ch, err = imv2.NewChannel("cch_1", imv2.RoleConnector, neg, out, target, &imv2.Options{Pending: st.Pending(), Completed: st.Completed()})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	resend, err := imv2.NewChatMessage("cch_1", imv2.ToConnector, imv2.ChatMessage{MessageID: "f1", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Receive(context.Background(), resend); err != nil {
		t.Fatal(err)
	}
	a, err := imv2.DecodeChatMessageAck(out.next(t))
	if err != nil {
		t.Fatal(err)
	}
	if n := posts.Load(); n != 1 || a.Status != imv2.AckDuplicate {
		t.Fatalf("after the restart the resend got %s and the final was posted %d times, want duplicate and once (S8)", a.Status, n)
	}
}
