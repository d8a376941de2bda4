package boltstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/fakeclock"
)

// sink records packets a channel sends.
type sink struct {
	pkts chan *imv2.Packet
}

func (s *sink) Send(_ context.Context, p *imv2.Packet) error {
	s.pkts <- p
	return nil
}

func (s *sink) next(t *testing.T) *imv2.Packet {
	t.Helper()
	select {
	case p := <-s.pkts:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no packet")
		return nil
	}
}

// TestChannel_S8_S1_RestartOnBoltStore runs a Connector channel on a bolt
// file, "restarts" it (close the channel and the store, open both again)
// and checks: the final accepted before the restart is answered duplicate
// and never posted again (S8), and the user message pending before the
// restart is resent with the same message_id and text (S1).
func TestChannel_S8_S1_RestartOnBoltStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	clk := fakeclock.New(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	posts := 0
	target := imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { posts++; return nil })

	open := func() (*boltstore.Store, *imv2.Channel, *sink) {
		st, err := boltstore.Open(path, boltstore.Options{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		w := &sink{pkts: make(chan *imv2.Packet, 16)}
		ch, err := imv2.NewChannel("cch_1", imv2.RoleConnector, neg, w, target, &imv2.Options{
			Clock: clk, Pending: st.Pending(), Completed: st.Completed(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return st, ch, w
	}

	st, ch, w := open()
	final, err := imv2.NewChatMessage("cch_1", imv2.ToConnector, imv2.ChatMessage{MessageID: "a1", Text: "answer"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Receive(context.Background(), final); err != nil {
		t.Fatal(err)
	}
	if a, _ := imv2.DecodeChatMessageAck(w.next(t)); a == nil || a.Status != imv2.AckAccepted {
		t.Fatalf("first final not accepted: %+v", a)
	}
	userID, err := ch.Send(context.Background(), imv2.ChatMessage{Text: "typed before the crash"})
	if err != nil {
		t.Fatal(err)
	}
	w.next(t) // sent, never acked
	ch.Close()
	st.Close()

	st, ch, w = open()
	defer st.Close()
	defer ch.Close()
	resent, err := imv2.DecodeChatMessage(w.next(t), imv2.ToXAgent)
	if err != nil {
		t.Fatal(err)
	}
	if resent.MessageID != userID || resent.Text != "typed before the crash" {
		t.Fatalf("S1: resent %+v", resent)
	}
	again, _ := imv2.NewChatMessage("cch_1", imv2.ToConnector, imv2.ChatMessage{MessageID: "a1", Text: "answer"})
	if err := ch.Receive(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	if a, _ := imv2.DecodeChatMessageAck(w.next(t)); a == nil || a.Status != imv2.AckDuplicate {
		t.Fatalf("S8: resent final answered %+v", a)
	}
	if posts != 1 {
		t.Fatalf("S8: final posted %d times across the restart", posts)
	}
}
