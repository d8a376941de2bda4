package connector

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
)

// lossy is a chat service without dedup whose first n posts are applied
// (shown) and then answered with an error, as a lost HTTP response is.
type lossy struct {
	lose    int
	idem    bool // deduplicates by the idempotency key
	notDone bool // the failures are not applied and say so (imv2.NotPosted)

	mu    sync.Mutex
	posts int      // Post calls
	shown []string // message IDs on screen, in order
	keys  map[string]bool
}

var errLost = errors.New("read tcp: connection reset by peer") // after the request went out

func (p *lossy) Post(_ context.Context, _ Conversation, m *Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts++
	if p.notDone && p.posts <= p.lose {
		return imv2.NotPosted(errors.New("503 Service Unavailable"))
	}
	if !p.idem || !p.keys[m.IdempotencyKey] {
		p.shown = append(p.shown, m.MessageID)
	}
	if p.keys == nil {
		p.keys = map[string]bool{}
	}
	p.keys[m.IdempotencyKey] = true
	if p.posts <= p.lose {
		return errLost
	}
	return nil
}

func (p *lossy) got() (int, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posts, slices.Clone(p.shown)
}

// lossyChecker can tell whether a key was posted.
type lossyChecker struct{ *lossy }

func (p lossyChecker) WasPosted(_ context.Context, _ Conversation, key string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[key], nil
}

// lossyIdem deduplicates by the idempotency key.
type lossyIdem struct{ *lossy }

func (p lossyIdem) PostsIdempotently() bool { return true }

// driveOver runs f, advancing clock past every timer f's goroutines arm
// beyond base (a Channel's Target timeout is one, armed as it is waited
// on), and returns f's error. It advances only once such a timer is armed
// (fakeclock's BlockUntil), so it never sleeps.
func driveOver(t *testing.T, clock *fakeclock.Clock, base int, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	for {
		ctx, cancel := context.WithCancel(t.Context())
		armed := make(chan error, 1)
		go func() { armed <- clock.BlockUntil(ctx, base+1) }()
		select {
		case err := <-done:
			cancel()
			<-armed
			return err
		case err := <-armed:
			cancel()
			if err != nil {
				t.Fatal("the call did not end")
			}
			clock.Advance(time.Second)
		}
	}
}

// unitChannel is channel ch_1 of k, as the Server opens it (the kit's
// Target, its Store's claims), on a wire of its own: final delivers a
// final through it, driving clock, and returns the ack's rejection (nil:
// accepted or duplicate). The Channel decides what a failed post means
// (the error contract), so these tests go through it.
func unitChannel(t *testing.T, k *Connector, clock *fakeclock.Clock) func(id string) error {
	t.Helper()
	acks := make(chan *imv2.Packet, 16)
	wire := imv2.TransportFunc(func(_ context.Context, p *imv2.Packet) error { acks <- p; return nil })
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	ch, err := imv2.NewChannel("ch_1", imv2.RoleConnector, neg, wire, drainTarget{k.display, k},
		&imv2.Options{Clock: clock, Completed: k.counted.completed()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return func(id string) error {
		p, err := imv2.NewChatMessage("ch_1", imv2.ToConnector, imv2.ChatMessage{MessageID: id, Text: "Hi"})
		if err != nil {
			t.Fatal(err)
		}
		return driveOver(t, clock, 1, func() error {
			if err := ch.Receive(context.Background(), p); err != nil {
				return err
			}
			a, err := imv2.DecodeChatMessageAck(<-acks)
			if err != nil {
				return err
			}
			if a.Status == imv2.AckRejected {
				return &imv2.Error{Code: a.Code, Message: a.Message, Retryable: a.Retryable}
			}
			return nil
		})
	}
}

// TestKit_S8_A8_LostResponseIsNotPostedTwice: a post the platform applied
// whose response was lost is not posted blindly again. A PostChecker is
// asked and the final is accepted, shown once; an IdempotentPlatform's
// final is rejected retryable and its resend gets the same key again,
// shown once; a platform with neither is not posted again and the final
// and its resend are answered delivery_outcome_unknown, retryable=false
// (the Channel's claim rule: may be lost and reported, never shown twice).
func TestKit_S8_A8_LostResponseIsNotPostedTwice(t *testing.T) {
	for _, tc := range []struct {
		name      string
		platform  func(*lossy) Platform
		wantPosts int
		wantCode  imv2.Code // "" for accepted
	}{
		{"no dedup", func(p *lossy) Platform { return p }, 1, imv2.CodeDeliveryOutcomeUnknown},
		{"PostChecker", func(p *lossy) Platform { return lossyChecker{p} }, 1, ""},
		{"IdempotentPlatform", func(p *lossy) Platform { p.idem = true; return lossyIdem{p} }, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &lossy{lose: 1}
			k, clock := newUnit(t, tc.platform(p), false, Options{})
			final := unitChannel(t, k, clock)
			err := final("m1")
			if err != nil && imv2.SafeToRetry(err) {
				err = final("m1") // xAgent's resend (A8)
			}
			if tc.wantCode != "" {
				var e, a *imv2.Error
				if again := final("m1"); !errors.As(again, &a) || !errors.As(err, &e) || a.Code != e.Code || a.Retryable {
					t.Fatalf("resend = %v; want %v again", again, err)
				}
			}
			posts, shown := p.got()
			if !slices.Equal(shown, []string{"m1"}) {
				t.Fatalf("shown %q after a lost response; want m1 once", shown)
			}
			if posts != tc.wantPosts {
				t.Fatalf("%d posts; want %d", posts, tc.wantPosts)
			}
			var e *imv2.Error
			switch {
			case tc.wantCode == "" && err != nil:
				t.Fatalf("final = %v; want accepted", err)
			case tc.wantCode != "" && (!errors.As(err, &e) || e.Code != tc.wantCode || imv2.SafeToRetry(err)):
				t.Fatalf("final = %v; want %s, retryable=false", err, tc.wantCode)
			}
		})
	}
}

// TestKit_A8_RetryableIsRetriedInProcess: a failure the platform marks
// imv2.NotPosted (not posted) is retried by the kit with backoff and shown
// once.
func TestKit_A8_RetryableIsRetriedInProcess(t *testing.T) {
	p := &lossy{lose: 2, notDone: true}
	k, clock := newUnit(t, p, false, Options{})
	err := unitChannel(t, k, clock)("m1")
	if posts, shown := p.got(); err != nil || posts != 3 || !slices.Equal(shown, []string{"m1"}) {
		t.Fatalf("final = %v after %d posts, shown %q; want accepted after 3, shown once", err, posts, shown)
	}
}

// flakyChecker is a PostChecker whose check fails while down is set.
type flakyChecker struct {
	*lossy
	down bool
}

func (p *flakyChecker) WasPosted(_ context.Context, _ Conversation, key string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false, errors.New("search unavailable")
	}
	return p.keys[key], nil
}

// TestKit_S8_UnknownOutcomeResendAsksFirst: when a PostChecker cannot
// answer after a lost response, the final is rejected retryable and its
// resend asks the platform before posting (the claim stayed): it was
// shown, so it is accepted without a second post.
func TestKit_S8_UnknownOutcomeResendAsksFirst(t *testing.T) {
	p := &flakyChecker{lossy: &lossy{lose: 1}, down: true}
	k, clock := newUnit(t, p, false, Options{})
	final := unitChannel(t, k, clock)
	post := func() error { return final("m1") }
	if err := post(); err == nil || !imv2.SafeToRetry(err) {
		t.Fatalf("final = %v; want a retryable rejection while the check is down", err)
	}
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
	if err := post(); err != nil {
		t.Fatalf("resend = %v; want accepted (it was posted)", err)
	}
	if posts, shown := p.got(); posts != 1 || !slices.Equal(shown, []string{"m1"}) {
		t.Fatalf("%d posts, shown %q; want 1, m1 once", posts, shown)
	}
}
