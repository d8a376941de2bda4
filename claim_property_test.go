package imv2

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2/fakeclock"
	"pgregory.net/rapid"
)

// crashPoint is where the process running a delivery dies.
type crashPoint uint8

const (
	noCrash          crashPoint = iota
	crashAfterClaim             // the claim is stored, the post never runs
	crashBeforeStore            // the post ran, its Record is never stored
	crashAfterBegin             // the post was recorded as begun, and never ran
)

// crashingStore is a ClaimStore shared by every "process" of the property
// test; an armed crash point makes the call it names behave as if the
// process died there: the claim is stored but the caller never learns it,
// or the record is never stored.
type crashingStore struct {
	ClaimStore
	mu    sync.Mutex
	armed crashPoint
	hit   bool
	begun map[string]bool // message IDs whose post was recorded as begun
}

// Begin implements ClaimStarter, passing it on to the store it wraps
// (which is one), and records that the post began.
func (s *crashingStore) Begin(ctx context.Context, ch, id, owner string) error {
	err := s.ClaimStore.(ClaimStarter).Begin(ctx, ch, id, owner)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		if s.begun == nil {
			s.begun = map[string]bool{}
		}
		s.begun[id] = true
	}
	if err == nil && s.armed == crashAfterBegin {
		s.armed, s.hit = noCrash, true
		return errCrashed
	}
	return err
}

var errCrashed = errors.New("process crashed here")

func (s *crashingStore) arm(p crashPoint) {
	s.mu.Lock()
	s.armed, s.hit = p, false
	s.mu.Unlock()
}

func (s *crashingStore) crashed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hit
}

func (s *crashingStore) Claim(ctx context.Context, ch, id string, fp Fingerprint, owner string, lease time.Duration) (Claim, error) {
	c, err := s.ClaimStore.Claim(ctx, ch, id, fp, owner, lease)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.armed == crashAfterClaim && (c.State == ClaimAcquired || c.State == ClaimOrphaned) {
		s.armed, s.hit = noCrash, true
		return Claim{}, errCrashed
	}
	return c, err
}

func (s *crashingStore) Record(ctx context.Context, ch, id string, fp Fingerprint) error {
	s.mu.Lock()
	if s.armed == crashBeforeStore {
		s.armed, s.hit = noCrash, true
		s.mu.Unlock()
		return errCrashed
	}
	s.mu.Unlock()
	return s.ClaimStore.Record(ctx, ch, id, fp)
}

// screen is the platform: what users saw, surviving every crash. With
// dedup it shows one post per idempotency key (Matrix transaction IDs);
// with check it can be asked whether a key was posted.
type screen struct {
	mu    sync.Mutex
	shown map[string]int // message_id → times shown
	keys  map[string]bool
	dedup bool
}

func (s *screen) PostMessage(ctx context.Context, _ string, m *ChatMessage) error {
	k, _ := IdempotencyKey(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !(s.dedup && s.keys[k]) {
		s.shown[m.MessageID]++
	}
	s.keys[k] = true
	return nil
}

// screenIdem and screenCheck add one capability each.
type screenIdem struct{ *screen }

func (s screenIdem) PostsIdempotently() bool { return true }

type screenCheck struct{ *screen }

func (s screenCheck) WasPosted(_ context.Context, _, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key], nil
}

// TestClaim_S8_Property_NeverShownTwiceAcrossCrashes: xAgent sends a few
// finals to a Connector whose process is killed at random points — after a
// message's claim is stored but before its post, or after its post but
// before its completion record — and restarted on the same store; xAgent
// resends whatever got no terminal ack. Whatever the interleaving, no final
// is shown twice; at the end each final is shown once or was reported
// delivery_outcome_unknown — only one whose post was recorded as begun
// (ClaimStarter: a death between claim and post loses nothing) — and a
// Target that deduplicates or can be asked loses none.
func TestClaim_S8_Property_NeverShownTwiceAcrossCrashes(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		kind := rapid.SampledFrom([]string{"plain", "idempotent", "check"}).Draw(rt, "target")
		n := rapid.IntRange(1, 4).Draw(rt, "messages")
		clk := fakeclock.New(t0)
		store := &crashingStore{ClaimStore: NewMemoryCompletedStore(0, 0, clk)}
		sc := &screen{shown: map[string]int{}, keys: map[string]bool{}, dedup: kind == "idempotent"}
		var target Target = sc
		switch kind {
		case "idempotent":
			target = screenIdem{sc}
		case "check":
			target = screenCheck{sc}
		}
		var c *Channel
		var w *wire
		restart := func() {
			if c != nil {
				c.Close()
				// The dead process's claims are orphaned once their lease
				// ran out: all a memory store can know of a death.
				clk.Advance(c.o.ClaimLease)
			}
			w = newWire()
			var err error
			c, err = NewChannel("cch_1", RoleConnector, imNegotiated(), w, target, &Options{Clock: clk, Completed: store})
			if err != nil {
				rt.Fatal(err)
			}
		}
		restart()
		defer func() { c.Close() }()

		outcome := map[string]*ChatMessageAck{} // terminal acks, by message_id
		deliver := func(i int, crash crashPoint) {
			id := fmt.Sprintf("m%d", i)
			if outcome[id] != nil {
				return
			}
			store.arm(crash)
			p, err := NewChatMessage("cch_1", ToConnector, ChatMessage{MessageID: id, Text: "final " + id})
			if err != nil {
				rt.Fatal(err)
			}
			if err := c.Receive(context.Background(), p); err != nil {
				rt.Fatal(err)
			}
			var ackPkt *Packet
			select {
			case ackPkt = <-w.ch:
			case <-time.After(wait):
				rt.Fatal("no ack")
			}
			if store.crashed() { // the process died: its ack never left
				store.arm(noCrash)
				restart()
				return
			}
			store.arm(noCrash)
			a, err := DecodeChatMessageAck(ackPkt)
			if err != nil {
				rt.Fatal(err)
			}
			if a.Status != AckRejected || !a.Retryable {
				outcome[id] = a
			}
		}

		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for range steps {
			i := rapid.IntRange(0, n-1).Draw(rt, "msg")
			crash := crashPoint(rapid.IntRange(0, 3).Draw(rt, "crash"))
			deliver(i, crash)
			for id, k := range sc.shown {
				if k > 1 {
					rt.Fatalf("S8: %s shown %d times", id, k)
				}
			}
		}
		for i := range n { // no more crashes: resend until terminal
			for tries := 0; outcome[fmt.Sprintf("m%d", i)] == nil; tries++ {
				if tries > 3 {
					rt.Fatalf("m%d: no terminal ack", i)
				}
				deliver(i, noCrash)
			}
		}
		for i := range n {
			id := fmt.Sprintf("m%d", i)
			a, shown := outcome[id], sc.shown[id]
			switch {
			case shown > 1:
				rt.Fatalf("S8: %s shown %d times", id, shown)
			case a.Status == AckRejected && a.Code == CodeDeliveryOutcomeUnknown:
				if kind != "plain" {
					rt.Fatalf("%s reported unknown although the %s target could have settled it", id, kind)
				}
				if !store.begun[id] {
					rt.Fatalf("%s reported unknown although its post never began: lost", id)
				}
			case a.Status == AckRejected:
				rt.Fatalf("%s rejected %s", id, a.Code)
			case shown != 1:
				rt.Fatalf("%s acked %s but shown %d times", id, a.Status, shown)
			}
		}
	})
}
