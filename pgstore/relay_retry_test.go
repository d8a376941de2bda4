package pgstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/pgstore"
)

// flakyPending is a replica's pending store whose List fails while down
// is set, as a query does while the database restarts or a pool is spent.
type flakyPending struct {
	imv2.PendingStore
	down  atomic.Bool
	fails atomic.Int64
}

func (p *flakyPending) List(ctx context.Context, channelID string) ([]imv2.PendingEntry, error) {
	if p.down.Load() {
		p.fails.Add(1)
		return nil, errors.New("pgstore: conn closed")
	}
	return p.PendingStore.List(ctx, channelID)
}

// oneOpen is a Server holding one channel, open.
type oneOpen struct{ ch *imv2.Channel }

func (o oneOpen) IsOpen(id string) bool { return id == o.ch.ID() }
func (o oneOpen) Channel(id string) *imv2.Channel {
	if id == o.ch.ID() {
		return o.ch
	}
	return nil
}
func (o oneOpen) ChannelIDs() []string { return []string{o.ch.ID()} }

// TestRelay_S1_FailedAdoptRetried: a user message accepted on another
// replica is announced to the replica holding xAgent's connection, whose
// adopt fails (its store query failed). The Relay tries that adopt again
// until it succeeds, so the message reaches xAgent once the store
// answers, with no further notification. (The old Relay only logged the
// failure: the message stayed in the store until the next message or
// reconnect of that channel, and an operator's run lost 9 for good.)
func TestRelay_S1_FailedAdoptRetried(t *testing.T) {
	url := srv.NewDatabase(t)
	ctx := context.Background()
	holder, other := openStore(t, url, pgstore.Options{}), openStore(t, url, pgstore.Options{})
	const id = "cch_relay_retry"
	if err := holder.Register(ctx, id); err != nil {
		t.Fatal(err)
	}
	pending := &flakyPending{PendingStore: holder.Pending()}
	sent := make(chan string, 4)
	transport := imv2.TransportFunc(func(_ context.Context, p *imv2.Packet) error {
		if p.Type == imv2.TypeChatMessage {
			m, err := imv2.DecodeChatMessage(p, imv2.ToXAgent)
			if err != nil {
				return err
			}
			sent <- m.MessageID
		}
		return nil
	})
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	ch, err := imv2.NewChannel(id, imv2.RoleConnector, neg, transport, newKeyPlatform(false), &imv2.Options{Pending: pending, Completed: holder.Completed()})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	relay := pgstore.NewRelay(holder)
	relay.Serve(oneOpen{ch})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	defer func() { cancel(); <-done }()

	// The holder is listening once a notice of the other replica's Add
	// gets through: wait for a first message to arrive.
	first := pgstore.NewRelay(other)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := first.Send(ctx, id, imv2.ChatMessage{MessageID: "u-0", Text: "hello"}); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-sent:
			if got != "u-0" {
				t.Fatalf("sent %q, want u-0", got)
			}
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the holder's Relay never adopted u-0")
			}
			continue
		}
		break
	}

	pending.down.Store(true)
	if _, err := first.Send(ctx, id, imv2.ChatMessage{MessageID: "u-1", Text: "while the store fails"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); pending.fails.Load() < 2; { // the notified adopt failed, and its retry too
		if time.Now().After(deadline) {
			t.Fatalf("the failed adopt was not tried again (%d tries)", pending.fails.Load())
		}
		time.Sleep(5 * time.Millisecond) // polling another goroutine's store calls
	}
	pending.down.Store(false)
	select {
	case got := <-sent:
		if got != "u-1" {
			t.Fatalf("sent %q, want u-1", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("u-1 stayed in the store after its adopt failed: the Relay did not try again")
	}
}

// TestRelay_SendErrorsAreRetryableImv2Errors: a Send that the database
// cannot take fails within SendTimeout with an *imv2.Error
// connector_channel_unavailable, Retryable, not a raw driver error.
func TestRelay_SendErrorsAreRetryableImv2Errors(t *testing.T) {
	url := srv.NewDatabase(t)
	st := openStore(t, url, pgstore.Options{})
	relay := pgstore.NewRelay(st)
	_ = st.Close() // the pool is gone: every query fails at once
	_, err := relay.Send(context.Background(), "cch_x", imv2.ChatMessage{MessageID: "u-1", Text: "x"})
	var e *imv2.Error
	if !errors.As(err, &e) || e.Code != imv2.CodeChannelUnavailable || !e.Retryable {
		t.Fatalf("Send with the database away: %v (%T), want a retryable connector_channel_unavailable *imv2.Error", err, err)
	}
}
