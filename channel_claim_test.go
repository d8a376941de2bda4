package imv2

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/fakeclock"
)

// capTarget is a recTarget with the orphan capabilities and a record of
// the idempotency key each post carried.
type capTarget struct {
	*recTarget
	idempotent bool
	posted     func(key string) (bool, error) // WasPosted; nil: no capability wanted
	mu         sync.Mutex
	keys       []string
	checks     int
}

func (c *capTarget) PostMessage(ctx context.Context, ch string, m *ChatMessage) error {
	k, _ := IdempotencyKey(ctx)
	c.mu.Lock()
	c.keys = append(c.keys, k)
	c.mu.Unlock()
	return c.recTarget.PostMessage(ctx, ch, m)
}

func (c *capTarget) PostsIdempotently() bool { return c.idempotent }

func (c *capTarget) WasPosted(_ context.Context, _, key string) (bool, error) {
	c.mu.Lock()
	c.checks++
	c.mu.Unlock()
	if c.posted == nil {
		return false, errors.ErrUnsupported
	}
	return c.posted(key)
}

// orphanOf makes the claim a process killed after its post began and
// before its completion record leaves behind; expire (newClaimConnector)
// ends its lease, which is how a memory store learns its owner is gone.
func orphanOf(t *testing.T, c *Channel, id, text string) {
	t.Helper()
	cs := c.o.Completed.(ClaimStarter)
	fp := FingerprintOf(&ChatMessage{MessageID: id, Text: text})
	cl, err := cs.Claim(context.Background(), c.id, id, fp, "dead process", c.o.ClaimLease)
	require.NoError(t, err)
	require.Equal(t, ClaimAcquired, cl.State)
	require.NoError(t, cs.Begin(context.Background(), c.id, id, "dead process"))
}

// TestChannel_S8_OrphanWhosePostNeverBeganIsPosted: a process killed
// after a final's claim and before its post began (ClaimStarter.Begin
// never ran) left nothing on screen: the resend is posted, once, and the
// final is not lost — also to a Target that can neither dedup nor check.
func TestChannel_S8_OrphanWhosePostNeverBeganIsPosted(t *testing.T) {
	target := newRecTarget()
	c, w, expire := newClaimConnector(t, target)
	cs := c.o.Completed.(ClaimStarter)
	fp := FingerprintOf(&ChatMessage{MessageID: "a1", Text: "hello"})
	_, err := cs.Claim(context.Background(), c.id, "a1", fp, "dead process", c.o.ClaimLease)
	require.NoError(t, err)
	expire()
	p := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
	require.Equal(t, 1, target.postCount("a1"))
}

func newClaimConnector(t *testing.T, target Target) (*Channel, *wire, func()) {
	t.Helper()
	c, w, clk := newConnector(t, target, nil)
	return c, w, func() { clk.Advance(c.o.ClaimLease) }
}

func TestChannel_S8_PostCarriesIdempotencyKey(t *testing.T) {
	target := &capTarget{recTarget: newRecTarget()}
	c, w, _ := newClaimConnector(t, target)
	p := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
	require.Equal(t, []string{IdempotencyKeyOf("cch_1", "a1")}, target.keys)
	require.Zero(t, target.checks, "a first delivery needs no check")
}

func TestChannel_S8_OrphanWithoutCapabilityIsUnknown(t *testing.T) {
	for name, target := range map[string]Target{
		"plain":               newRecTarget(),
		"capability declined": &capTarget{recTarget: newRecTarget()}, // not idempotent, WasPosted unsupported
	} {
		t.Run(name, func(t *testing.T) {
			c, w, expire := newClaimConnector(t, target)
			orphanOf(t, c, "a1", "hello")
			expire()
			for range 2 { // a later copy finds the orphan again
				p := finalPacket(t, "a1", "hello")
				require.NoError(t, c.Receive(context.Background(), p))
				a := ackOf(t, p, w.next(t))
				require.Equal(t, AckRejected, a.Status)
				require.Equal(t, CodeDeliveryOutcomeUnknown, a.Code)
				require.False(t, a.Retryable, "S3: the sender reports it instead of resending")
			}
			posted := 0
			switch tg := target.(type) {
			case *recTarget:
				posted = tg.postCount("a1")
			case *capTarget:
				posted = tg.postCount("a1")
			}
			require.Zero(t, posted, "S8: an orphan is never posted blindly")
		})
	}
}

func TestChannel_S8_OrphanPostedAgainOnlyWhenSafe(t *testing.T) {
	boom := errors.New("search failed")
	for _, tc := range []struct {
		name       string
		idempotent bool
		posted     func(string) (bool, error)
		status     AckStatus
		code       Code
		retryable  bool
		posts      int
	}{
		{name: "idempotent target", idempotent: true, status: AckAccepted, posts: 1},
		{name: "check: not posted", posted: func(string) (bool, error) { return false, nil }, status: AckAccepted, posts: 1},
		{name: "check: posted", posted: func(string) (bool, error) { return true, nil }, status: AckDuplicate},
		{name: "check fails", posted: func(string) (bool, error) { return false, boom }, status: AckRejected, code: CodeTargetDeliveryFailed, retryable: true},
		{name: "check unsupported", posted: func(string) (bool, error) { return false, errors.ErrUnsupported }, status: AckRejected, code: CodeDeliveryOutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := &capTarget{recTarget: newRecTarget(), idempotent: tc.idempotent}
			var gotKey string
			if tc.posted != nil {
				target.posted = func(k string) (bool, error) { gotKey = k; return tc.posted(k) }
			}
			c, w, expire := newClaimConnector(t, target)
			orphanOf(t, c, "a1", "hello")
			expire()
			p := finalPacket(t, "a1", "hello")
			require.NoError(t, c.Receive(context.Background(), p))
			a := ackOf(t, p, w.next(t))
			require.Equal(t, tc.status, a.Status)
			require.Equal(t, tc.code, a.Code)
			require.Equal(t, tc.retryable, a.Retryable)
			require.Equal(t, tc.posts, target.postCount("a1"))
			if tc.posted != nil {
				require.Equal(t, IdempotencyKeyOf("cch_1", "a1"), gotKey)
			}
			if tc.status == AckRejected {
				return
			}
			// Completed now: a resend is a duplicate, posted no more.
			again := finalPacket(t, "a1", "hello")
			require.NoError(t, c.Receive(context.Background(), again))
			require.Equal(t, AckDuplicate, ackOf(t, again, w.next(t)).Status)
			require.Equal(t, tc.posts, target.postCount("a1"))
		})
	}
}

func TestChannel_S8_CheckFailureLeavesOrphanToCheckAgain(t *testing.T) {
	fail := true
	target := &capTarget{recTarget: newRecTarget()}
	target.posted = func(string) (bool, error) {
		if fail {
			return false, errors.New("platform down")
		}
		return false, nil
	}
	c, w, expire := newClaimConnector(t, target)
	orphanOf(t, c, "a1", "hello")
	expire()
	p := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, CodeTargetDeliveryFailed, ackOf(t, p, w.next(t)).Code)
	fail = false // the Channel delivers one message at a time: no race with the Target
	again := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), again))
	require.Equal(t, AckAccepted, ackOf(t, again, w.next(t)).Status)
	require.Equal(t, 2, target.checks, "the orphan was checked again, not taken as free")
	require.Equal(t, 1, target.postCount("a1"))
}

func TestChannel_S6_OrphanWithOtherContentIsConflict(t *testing.T) {
	target := &capTarget{recTarget: newRecTarget(), idempotent: true}
	c, w, expire := newClaimConnector(t, target)
	orphanOf(t, c, "a1", "hello")
	expire()
	p := finalPacket(t, "a1", "hello, changed")
	require.NoError(t, c.Receive(context.Background(), p))
	a := ackOf(t, p, w.next(t))
	require.Equal(t, CodeMessageIDConflict, a.Code)
	require.Zero(t, target.postCount("a1"))
}

func TestChannel_A6_HeldByAnotherOwnerIsBusy(t *testing.T) {
	target := newRecTarget()
	c, w, _ := newClaimConnector(t, target)
	orphanOf(t, c, "a1", "hello") // live: its lease has not run out
	p := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), p))
	a := ackOf(t, p, w.next(t))
	require.Equal(t, AckRejected, a.Status)
	require.Equal(t, CodeChannelBusy, a.Code)
	require.True(t, a.Retryable)
	require.Zero(t, target.postCount("a1"))
}

func TestChannel_S8_RefusalReleasesClaim(t *testing.T) {
	target := newRecTarget()
	target.err = NotPosted(errors.New("rate limited"))
	c, w, _ := newClaimConnector(t, target)
	p := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, CodeTargetDeliveryFailed, ackOf(t, p, w.next(t)).Code)
	target.mu.Lock()
	target.err = nil
	target.mu.Unlock()
	// Released: the resend is a fresh delivery, not an orphan of unknown outcome.
	again := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), again))
	require.Equal(t, AckAccepted, ackOf(t, again, w.next(t)).Status)
	require.Equal(t, 1, target.postCount("a1"))
}

// slowTarget takes the whole TargetTimeout, on the fake clock, in each
// call that runs around a delivery: the activity clear, the WasPosted
// check and the post. At the post's end it asks the store, as a replica
// would, whether the message is still held.
type slowTarget struct {
	*recTarget
	clk         *fakeclock.Clock
	store       ClaimStore
	timeout     time.Duration
	idleShown   bool  // the activity clear ran
	idleFirst   bool  // it ran before the post (C6)
	replicaSaw  Claim // a replica's Claim at the post's end
	replicaErrs error
}

func (s *slowTarget) SetActivity(_ context.Context, _ string, a ChatActivity) error {
	if a.Status == ActivityIdle {
		s.clk.Advance(s.timeout)
		s.mu.Lock()
		s.idleShown = true
		s.mu.Unlock()
	}
	return nil
}

func (s *slowTarget) WasPosted(context.Context, string, string) (bool, error) {
	s.clk.Advance(s.timeout)
	return false, nil
}

func (s *slowTarget) PostMessage(ctx context.Context, ch string, m *ChatMessage) error {
	s.mu.Lock()
	s.idleFirst = s.idleShown
	s.mu.Unlock()
	s.clk.Advance(s.timeout)
	cl, err := s.store.Claim(ctx, ch, m.MessageID, FingerprintOf(m), "replica", time.Minute)
	s.mu.Lock()
	s.replicaSaw, s.replicaErrs = cl, err
	s.mu.Unlock()
	return s.recTarget.PostMessage(ctx, ch, m)
}

// TestChannel_A6_ClaimLeaseCoversTheWorstCaseAfterTheClaim: every call
// around a delivery takes the full TargetTimeout (an orphan's WasPosted
// check, the activity clear, the post); a replica sharing the store must
// still find the message held when the post ends, and the final still
// follows the activity clear (C6).
func TestChannel_A6_ClaimLeaseCoversTheWorstCaseAfterTheClaim(t *testing.T) {
	const timeout = time.Minute
	clk := fakeclock.New(t0)
	store := NewMemoryCompletedStore(0, 0, clk)
	target := &slowTarget{recTarget: newRecTarget(), clk: clk, store: store, timeout: timeout}
	c, w, _ := newConnector(t, target, &Options{Clock: clk, Completed: store, TargetTimeout: timeout, ActivityTimeout: time.Hour})
	orphanOf(t, c, "a1", "hello")
	clk.Advance(c.o.ClaimLease) // the dead process's lease ends

	require.NoError(t, c.Receive(context.Background(), activityPacket(t, ActivityThinking, "")))
	p := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)

	target.mu.Lock()
	defer target.mu.Unlock()
	require.NoError(t, target.replicaErrs)
	require.Equal(t, ClaimHeld, target.replicaSaw.State, "A6: the lease ran out while the post ran: %+v", target.replicaSaw)
	require.True(t, target.idleFirst, "C6: the final follows the activity clear")
}
