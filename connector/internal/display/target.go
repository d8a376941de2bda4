package display

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/defaults"
)

// Defaults of Options; the package doc explains each.
const (
	DefaultInterval        = 500 * time.Millisecond
	DefaultMaxDrafts       = 1024
	DefaultDraftTTL        = 5 * time.Minute
	DefaultTypingRefresh   = 4 * time.Second
	DefaultActivityTimeout = 30 * time.Second
	DefaultMaxTyping       = 1024
	DefaultCallTimeout     = 10 * time.Second
)

// ErrFull is wrapped by the error UpdateDraft or SetActivity return when a
// state cap is reached and the new draft or typing indicator is refused.
var ErrFull = errors.New("display: state is full")

// ErrSkipDraft is matched (errors.Is) by a Platform.PostDraft error, or the
// error of a message's first Platform.Draft, that leaves the temporary
// message's outcome unknown: it may be shown (a lost response), so posting
// it again could show a second one. The Target then
// shows no more drafts of that message and its final goes to
// Platform.Post, as if no draft had been shown. A draft is not a final:
// one stale temporary message at most beats a second one, and the final
// text is shown either way.
var ErrSkipDraft = errors.New("display: the temporary message's outcome is unknown; skipping it")

// Options configure a Target; nil or zero fields take the defaults above.
type Options struct {
	// Mode is the delta display strategy; required.
	Mode Mode
	// Interval is the least time between two Post/Edit calls of one message
	// in mode Edit; drafts in between are coalesced into the next edit.
	Interval time.Duration
	// Clock drives every timer; default clock.System{}.
	Clock clock.Clock
	// Logger gets the errors of calls no caller waits for (coalesced edits,
	// typing refreshes, discards); default discards.
	Logger *slog.Logger
	// MaxDrafts caps the drafts open at once over all channels; beyond it a
	// new message gets no draft and is shown by its final alone.
	MaxDrafts int
	// DraftTTL drops a draft that got no update for this long.
	DraftTTL time.Duration
	// TypingRefresh is how often a shown typing indicator is sent again
	// while the activity lasts; keep it below the platform's typing expiry.
	// Negative: never sent again (a platform whose typing state lasts
	// until cleared, as XMPP chat states do).
	TypingRefresh time.Duration
	// ActivityTimeout clears typing this long after the last thinking or
	// tool snapshot of a channel (C7).
	ActivityTimeout time.Duration
	// MaxTyping caps the channels showing typing at once.
	MaxTyping int
	// CallTimeout bounds each platform call made from a timer, where no
	// caller's context applies.
	CallTimeout time.Duration
	// MaxTextBytes, when set, is the longest text the platform shows:
	// drafts are cut to it on a rune boundary, and a longer final is
	// refused for good before the platform is called.
	MaxTextBytes int
}

// Target turns a Platform into an imv2.Target, port.StreamingTarget and
// port.ActivityTarget, with the display strategy of its Mode. It is safe
// for concurrent use and serves any number of channels; Close stops every
// timer it started.
type Target struct {
	p Platform

	mode        Mode
	clock       clock.Clock
	log         *slog.Logger
	interval    time.Duration
	maxDrafts   int
	draftTTL    time.Duration
	refresh     time.Duration
	actTimeout  time.Duration
	maxTyping   int
	callTimeout time.Duration
	maxText     int // 0: no limit

	base   context.Context // parent of timer-driven calls; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per scheduled timer callback

	mu     sync.Mutex
	closed bool
	drafts map[draftKey]*draft
	typing map[string]*typingState
	// shown holds the handles of drafts that aged out while their
	// temporary message stayed on screen (Discard failed or is
	// unsupported), for the final that finishes them (M11).
	shown    map[draftKey]shownDraft
	shownSeq uint64
}

// shownDraft is an aged-out draft's handle; seq orders them by age.
type shownDraft struct {
	handle string
	seq    uint64
}

// New returns a Target that displays on p. It fails when opts has no Mode
// or holds a negative value.
func New(p Platform, opts *Options) (*Target, error) {
	if p == nil {
		return nil, errors.New("display: nil Platform")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Interval < 0 || o.DraftTTL < 0 || o.ActivityTimeout < 0 ||
		o.CallTimeout < 0 || o.MaxDrafts < 0 || o.MaxTyping < 0 || o.MaxTextBytes < 0 {
		return nil, errors.New("display: negative option")
	}
	t := &Target{
		p:           p,
		mode:        o.Mode,
		clock:       o.Clock,
		log:         o.Logger,
		interval:    defaults.Or(o.Interval, DefaultInterval),
		maxDrafts:   defaults.Or(o.MaxDrafts, DefaultMaxDrafts),
		draftTTL:    defaults.Or(o.DraftTTL, DefaultDraftTTL),
		refresh:     defaults.Or(o.TypingRefresh, DefaultTypingRefresh),
		actTimeout:  defaults.Or(o.ActivityTimeout, DefaultActivityTimeout),
		maxTyping:   defaults.Or(o.MaxTyping, DefaultMaxTyping),
		callTimeout: defaults.Or(o.CallTimeout, DefaultCallTimeout),
		maxText:     o.MaxTextBytes,
		drafts:      make(map[draftKey]*draft),
		typing:      make(map[string]*typingState),
		shown:       make(map[draftKey]shownDraft),
	}
	if t.clock == nil {
		t.clock = clock.System{}
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if t.mode < Stream || t.mode > Buffer {
		return nil, fmt.Errorf("display: no such mode %d", t.mode)
	}
	t.base, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// Mode returns the strategy in use.
func (t *Target) Mode() Mode { return t.mode }

// OpenDrafts returns the number of drafts held, for metrics and tests.
func (t *Target) OpenDrafts() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.drafts)
}

// PostMessage shows the final m: it turns the message's draft into m
// (Finish) when one was displayed, and sends m as a new message otherwise,
// so the platform shows m.Text exactly once (M11, M13). It returns after the
// platform accepted the text and every file (M12); the platform's error is
// returned unchanged (A8), and a retry of the same message finishes the same
// draft. It clears the channel's typing indicator (C6); a typing failure is
// only logged (C8).
func (t *Target) PostMessage(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	if m == nil {
		return imv2.Errorf(imv2.CodeInvalidPacket, "display: nil message")
	}
	if t.maxText > 0 && len(m.Text) > t.maxText {
		// A retry cannot make it fit; the platform would only fail it.
		return imv2.Refused(fmt.Errorf("display: the text is %d bytes, over the platform's %d (MaxTextBytes)", len(m.Text), t.maxText))
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return errClosed()
	}
	// Stop refreshing before the final goes out, clear after: a refresh
	// landing after the final would show typing under the answer.
	ty := t.takeTypingLocked(channelID)
	d := t.drafts[draftKey{channelID, m.MessageID}]
	if d != nil {
		d.finishing = true
		t.stopLocked(&d.edit)
	}
	t.mu.Unlock()

	err := t.final(ctx, d, channelID, m)
	if terr := t.typingOff(ctx, ty); terr != nil {
		t.log.Warn("display: clearing typing failed", "connector_channel_id", channelID, "err", terr)
	}
	return err
}

// Close stops every timer, waits for the timer callbacks already running
// (their platform calls are cancelled) and drops all state. Later calls
// return an *imv2.Error with code closed, retryable so that the message is
// delivered again after a restart.
func (t *Target) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for _, d := range t.drafts {
		d.gone = true
		t.stopLocked(&d.edit)
		t.stopLocked(&d.expiry)
	}
	clear(t.drafts)
	for _, s := range t.typing {
		s.cleared = true
		t.stopLocked(&s.timer)
	}
	clear(t.typing)
	clear(t.shown)
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
	return nil
}

func errClosed() error {
	e := imv2.Errorf(imv2.CodeClosed, "display: target closed")
	e.Retryable = true
	return e
}

// slot holds one pending timer. gen tells a callback that fires whether it
// is still the slot's timer: a stopped timer may already be running.
type slot struct {
	t   clock.Timer
	gen uint64
}

// armLocked schedules f on the clock in the empty slot s and counts it for
// Close. t.mu is held and t is not closed, so no Add races Close's Wait.
func (t *Target) armLocked(s *slot, d time.Duration, f func(gen uint64)) {
	s.gen++
	gen := s.gen
	t.wg.Add(1)
	s.t = t.clock.AfterFunc(d, func() {
		defer t.wg.Done()
		f(gen)
	})
}

// firedLocked reports whether the callback of gen is still current and, if
// so, empties the slot.
func (s *slot) firedLocked(gen uint64) bool {
	if s.gen != gen {
		return false
	}
	s.t = nil
	return true
}

// stopLocked stops the slot's timer, if any, and invalidates a callback of
// it that is already running. A callback it prevented will never run, so
// its count is released here.
func (t *Target) stopLocked(s *slot) {
	if s.t == nil {
		return
	}
	if s.t.Stop() {
		t.wg.Done()
	}
	s.t = nil
	s.gen++
}

// callCtx bounds a platform call made from a timer.
func (t *Target) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.base, t.callTimeout)
}
