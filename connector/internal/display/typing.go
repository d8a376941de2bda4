package display

import (
	"context"
	"fmt"
	"time"

	"github.com/xagentkit/imv2"
)

// typingState is a typing indicator shown on one channel.
type typingState struct {
	ch string
	// call serializes the Typing calls of this channel, so that "off" never
	// overtakes an "on". Taken before t.mu, never while holding it.
	call  callLock
	shown bool // a Typing(thinking|tool) was attempted; guarded by call

	// Guarded by t.mu.
	act      imv2.ChatActivity // the last thinking/tool snapshot, the one shown
	deadline time.Time         // ActivityTimeout after the last thinking/tool snapshot
	timer    slot
	cleared  bool
}

// SetActivity degrades chat.activity to the platform's typing indicator
// (C5): thinking and tool show it, with the status and the tool name, and
// keep it refreshed every TypingRefresh until idle, the final, the first displayed delta text (C6) or
// ActivityTimeout after the last snapshot (C7). Its error is for the log only and never touches a message (C8).
func (t *Target) SetActivity(ctx context.Context, channelID string, a imv2.ChatActivity) error {
	switch a.Status {
	case imv2.ActivityIdle:
		return t.clearTyping(ctx, channelID)
	case imv2.ActivityThinking, imv2.ActivityTool:
	default:
		return imv2.Errorf(imv2.CodeInvalidPacket, "display: activity status %q is not thinking, tool or idle (C2)", a.Status)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return errClosed()
	}
	deadline := t.clock.Now().Add(t.actTimeout)
	if s := t.typing[channelID]; s != nil {
		s.deadline = deadline // a new snapshot extends it; the refresh goes on
		changed := s.act != a
		s.act = a
		t.mu.Unlock()
		if !changed {
			return nil
		}
		// Another status or tool is shown at once, not at the next refresh.
		return t.showTyping(ctx, s, a)
	}
	if len(t.typing) >= t.maxTyping {
		n := len(t.typing)
		t.mu.Unlock()
		return fmt.Errorf("display: %d channels typing, the cap: %w", n, ErrFull)
	}
	s := &typingState{ch: channelID, act: a, deadline: deadline}
	t.typing[channelID] = s
	t.scheduleTypingLocked(s, t.nextTick(t.actTimeout))
	t.mu.Unlock()
	return t.showTyping(ctx, s, a)
}

// showTyping shows snapshot a of s, unless s was cleared or a newer
// snapshot replaced a meanwhile (its own call shows that one).
func (t *Target) showTyping(ctx context.Context, s *typingState, a imv2.ChatActivity) error {
	s.call.Lock()
	defer s.call.Unlock()
	t.mu.Lock()
	live := !s.cleared && s.act == a
	t.mu.Unlock()
	if !live {
		return nil
	}
	s.shown = true
	return t.p.Typing(ctx, s.ch, a)
}

// typingIdle is what Platform.Typing gets to clear the indicator.
var typingIdle = imv2.ChatActivity{Status: imv2.ActivityIdle}

func (t *Target) scheduleTypingLocked(s *typingState, d time.Duration) {
	t.armLocked(&s.timer, d, func(gen uint64) { t.typingTick(s, gen) })
}

// nextTick is when the typing timer fires next, left before the deadline:
// at the next refresh, or at the deadline when refreshes are off.
func (t *Target) nextTick(left time.Duration) time.Duration {
	if t.refresh < 0 {
		return left
	}
	return min(t.refresh, left)
}

// typingTick refreshes the indicator, or clears it at the deadline (C7).
func (t *Target) typingTick(s *typingState, gen uint64) {
	s.call.Lock()
	defer s.call.Unlock()
	t.mu.Lock()
	if !s.timer.firedLocked(gen) || t.closed || s.cleared {
		t.mu.Unlock()
		return
	}
	ctx, cancel := t.callCtx()
	defer cancel()
	now := t.clock.Now()
	if left := s.deadline.Sub(now); left > 0 {
		t.scheduleTypingLocked(s, t.nextTick(left))
		if t.refresh < 0 {
			t.mu.Unlock()
			return // never refreshed: only the deadline's clear is due
		}
		a := s.act
		t.mu.Unlock()
		s.shown = true
		if err := t.p.Typing(ctx, s.ch, a); err != nil {
			t.log.Warn("display: refreshing typing failed", "connector_channel_id", s.ch, "err", err)
		}
		return
	}
	s.cleared = true
	if t.typing[s.ch] == s {
		delete(t.typing, s.ch)
	}
	t.mu.Unlock()
	if err := t.p.Typing(ctx, s.ch, typingIdle); err != nil {
		t.log.Warn("display: clearing typing after timeout failed", "connector_channel_id", s.ch, "err", err)
	}
}

// takeTypingLocked stops the channel's typing refresh and forgets it; the
// caller clears it on the platform with typingOff.
func (t *Target) takeTypingLocked(channelID string) *typingState {
	s := t.typing[channelID]
	if s == nil {
		return nil
	}
	s.cleared = true
	delete(t.typing, channelID)
	t.stopLocked(&s.timer)
	return s
}

// typingOff clears s on the platform if it was shown; s may be nil.
func (t *Target) typingOff(ctx context.Context, s *typingState) error {
	if s == nil {
		return nil
	}
	s.call.Lock()
	defer s.call.Unlock()
	if !s.shown {
		return nil
	}
	return t.p.Typing(ctx, s.ch, typingIdle)
}

// clearTyping clears the channel's typing now (C6).
func (t *Target) clearTyping(ctx context.Context, channelID string) error {
	t.mu.Lock()
	s := t.takeTypingLocked(channelID)
	t.mu.Unlock()
	return t.typingOff(ctx, s)
}

// clearTypingLogged is clearTyping where a failure must not fail the caller
// (C8).
func (t *Target) clearTypingLogged(ctx context.Context, channelID string) {
	if err := t.clearTyping(ctx, channelID); err != nil {
		t.log.Warn("display: clearing typing failed", "connector_channel_id", channelID, "err", err)
	}
}
