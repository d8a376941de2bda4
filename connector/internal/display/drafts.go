package display

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xagentkit/imv2"
)

type draftKey struct{ channel, message string }

// errBufferShowsNoDrafts is UpdateDraft's answer in mode Buffer.
var errBufferShowsNoDrafts = fmt.Errorf("display: mode buffer shows no drafts: %w", errors.ErrUnsupported)

// draft is the display state of one assistant message between its first
// delta and its final.
type draft struct {
	key draftKey
	// call serializes the platform calls of this message, so an edit never
	// overtakes the final. It is taken before t.mu, never while holding it.
	call callLock

	// Guarded by t.mu.
	posted    bool   // the platform accepted a Post or Draft; handle is valid
	handle    string // what that call returned
	accepted  string // text of the last draft the platform accepted
	latest    string // newest text (mode Edit), shown by the next edit
	seen      time.Time
	next      time.Time // mode Edit: earliest start of the next Post/Edit
	edit      slot      // mode Edit: the pending coalesced edit
	expiry    slot
	finishing bool // PostMessage holds it; no more drafts are shown
	skipped   bool // the first Post or Draft failed with ErrSkipDraft: no more drafts; the final is sent
	gone      bool // out of t.drafts: finished, expired or closed
}

// UpdateDraft shows text, the whole text so far of message messageID,
// as the mode says: handed to Platform.Draft at once (Stream), posted or
// edited at most once per interval with the newest text (Edit), or nothing
// (Buffer, K5: the error matches errors.ErrUnsupported, so the Channel
// knows the message is not in the chat before its final and keeps its
// place for it). The first displayed text clears the channel's typing (C6).
// An error is for the log only; the final carries the whole text anyway.
func (t *Target) UpdateDraft(ctx context.Context, channelID, messageID, text string) error {
	if t.mode == Buffer {
		// The final carries the whole text; nothing temporary is shown (K5).
		return errBufferShowsNoDrafts
	}
	text = cutText(text, t.maxText)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return errClosed()
	}
	d, err := t.draftLocked(draftKey{channelID, messageID})
	if err != nil || d.finishing {
		t.mu.Unlock()
		return err
	}
	if t.mode == Stream {
		t.mu.Unlock()
		return t.stream(ctx, d, text)
	}
	d.latest = text
	if d.edit.t != nil {
		t.mu.Unlock()
		return nil // coalesced into the pending edit
	}
	now := t.clock.Now()
	if now.Before(d.next) {
		t.armLocked(&d.edit, d.next.Sub(now), func(gen uint64) { t.editLater(d, gen) })
		t.mu.Unlock()
		return nil
	}
	d.next = now.Add(t.interval)
	t.mu.Unlock()
	d.call.Lock()
	defer d.call.Unlock()
	return t.show(ctx, d)
}

// cutText is s cut to at most max bytes (0: no limit) on a rune boundary.
func cutText(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}

// draftLocked returns the draft of k, creating it within the cap, and marks
// it seen now.
func (t *Target) draftLocked(k draftKey) (*draft, error) {
	now := t.clock.Now()
	d := t.drafts[k]
	if d == nil {
		if len(t.drafts) >= t.maxDrafts {
			// Refuse rather than evict: an evicted draft would leave its
			// temporary message behind and its final would post a second
			// one (M11). The refused message is shown by its final alone.
			return nil, imv2.Errorf(imv2.CodeDeltaLimitExceeded,
				"display: %d drafts open, the cap: %w", len(t.drafts), ErrFull)
		}
		d = &draft{key: k}
		t.armLocked(&d.expiry, t.draftTTL, func(gen uint64) { t.expire(d, gen) })
		t.drafts[k] = d
	}
	d.seen = now
	return d, nil
}

// stream hands one draft to Platform.Draft, in call order per message.
func (t *Target) stream(ctx context.Context, d *draft, text string) error {
	d.call.Lock()
	defer d.call.Unlock()
	t.mu.Lock()
	if d.finishing || d.gone || d.skipped {
		t.mu.Unlock()
		return nil
	}
	dr := Draft{MessageID: d.key.message, Handle: d.handle, Text: text, Suffix: text}
	if d.posted {
		if rest, ok := strings.CutPrefix(text, d.accepted); ok {
			dr.Suffix = rest
		} else {
			dr.Reset = true
		}
	}
	first := !d.posted
	t.mu.Unlock()
	if text == "" || (!first && dr.Suffix == "" && !dr.Reset) {
		return nil // nothing new to show
	}
	h, err := t.p.Draft(ctx, d.key.channel, dr)
	if err != nil {
		if first && errors.Is(err, ErrSkipDraft) {
			t.mu.Lock()
			d.skipped = true
			t.mu.Unlock()
		}
		return err
	}
	t.mu.Lock()
	if !d.posted {
		d.posted, d.handle = true, h
	}
	d.accepted = text
	t.mu.Unlock()
	if first {
		t.clearTypingLogged(ctx, d.key.channel)
	}
	return nil
}

// show posts or edits the temporary message with the newest text (mode
// Edit). d.call is held.
func (t *Target) show(ctx context.Context, d *draft) error {
	t.mu.Lock()
	if d.finishing || d.gone || d.skipped || d.latest == "" || (d.posted && d.latest == d.accepted) {
		t.mu.Unlock()
		return nil
	}
	text, handle, first := d.latest, d.handle, !d.posted
	t.mu.Unlock()
	var err error
	if first {
		handle, err = t.p.PostDraft(ctx, d.key.channel, d.key.message, text)
	} else {
		err = t.p.Edit(ctx, d.key.channel, handle, text)
	}
	if err != nil {
		if first && errors.Is(err, ErrSkipDraft) {
			t.mu.Lock()
			d.skipped = true
			t.mu.Unlock()
		}
		return err
	}
	t.mu.Lock()
	d.posted, d.handle, d.accepted = true, handle, text
	t.mu.Unlock()
	if first {
		t.clearTypingLogged(ctx, d.key.channel)
	}
	return nil
}

// editLater is the coalesced edit: it shows whatever text is newest when
// the interval is over.
func (t *Target) editLater(d *draft, gen uint64) {
	d.call.Lock()
	defer d.call.Unlock()
	t.mu.Lock()
	if !d.edit.firedLocked(gen) || t.closed || d.gone || d.finishing {
		t.mu.Unlock()
		return
	}
	d.next = t.clock.Now().Add(t.interval)
	t.mu.Unlock()
	ctx, cancel := t.callCtx()
	defer cancel()
	if err := t.show(ctx, d); err != nil {
		t.log.Warn("display: editing draft failed", "connector_channel_id", d.key.channel, "message_id", d.key.message, "err", err)
	}
}

// expire drops d once it has been idle for the TTL, and discards its
// temporary message if the platform can.
func (t *Target) expire(d *draft, gen uint64) {
	t.mu.Lock()
	if !d.expiry.firedLocked(gen) || t.closed || d.gone {
		t.mu.Unlock()
		return
	}
	now := t.clock.Now()
	due := d.seen.Add(t.draftTTL)
	if d.finishing || now.Before(due) {
		wait := due.Sub(now)
		if d.finishing {
			wait = t.draftTTL
		}
		t.armLocked(&d.expiry, wait, func(gen uint64) { t.expire(d, gen) })
		t.mu.Unlock()
		return
	}
	t.removeLocked(d)
	t.mu.Unlock()
	d.call.Lock() // wait for a Post in flight, to learn its handle
	defer d.call.Unlock()
	t.mu.Lock()
	posted, handle := d.posted, d.handle
	t.mu.Unlock()
	if !posted {
		return
	}
	ctx, cancel := t.callCtx()
	err := t.p.Discard(ctx, d.key.channel, handle)
	cancel()
	if err == nil {
		return
	}
	if !errors.Is(err, errors.ErrUnsupported) {
		t.log.Warn("display: discarding stale draft failed; its final finishes it", "connector_channel_id", d.key.channel, "message_id", d.key.message, "err", err)
	}
	// The temporary message is still on screen: a late final must finish
	// it in place, never post a second message beside it (M11).
	t.mu.Lock()
	t.keepShownLocked(d.key, handle)
	t.mu.Unlock()
}

// keepShownLocked keeps the handle of an aged-out draft whose message is
// still shown, for its final. At most MaxDrafts are kept; beyond, the
// oldest goes (logged): its final, if it ever comes, is posted beside it.
func (t *Target) keepShownLocked(k draftKey, handle string) {
	if t.closed {
		return
	}
	if len(t.shown) >= t.maxDrafts {
		var oldest draftKey
		var least uint64
		for sk, s := range t.shown {
			if least == 0 || s.seq < least {
				oldest, least = sk, s.seq
			}
		}
		delete(t.shown, oldest)
		t.log.Warn("display: too many aged-out drafts still shown; the oldest is forgotten", "connector_channel_id", oldest.channel, "message_id", oldest.message)
	}
	t.shownSeq++
	t.shown[k] = shownDraft{handle: handle, seq: t.shownSeq}
}

// removeLocked takes d out of the map and stops its timers.
func (t *Target) removeLocked(d *draft) {
	d.gone = true
	if t.drafts[d.key] == d {
		delete(t.drafts, d.key)
	}
	t.stopLocked(&d.edit)
	t.stopLocked(&d.expiry)
}

// final shows m as the one message of its message_id: Finish on the
// displayed draft, else Post. d may be nil (no draft: M13, Buffer, or
// refused by the cap); d.finishing is set.
func (t *Target) final(ctx context.Context, d *draft, channelID string, m *imv2.ChatMessage) error {
	if d == nil {
		k := draftKey{channelID, m.MessageID}
		t.mu.Lock()
		s, aged := t.shown[k]
		t.mu.Unlock()
		if !aged {
			return t.p.Post(ctx, channelID, m)
		}
		// Its draft aged out but could not be discarded: finish it.
		err := t.p.Finish(ctx, channelID, s.handle, m)
		if err == nil {
			t.mu.Lock()
			if t.shown[k] == s {
				delete(t.shown, k)
			}
			t.mu.Unlock()
		}
		return err
	}
	d.call.Lock()
	defer d.call.Unlock()
	t.mu.Lock()
	posted, handle := d.posted, d.handle
	t.mu.Unlock()
	var err error
	if posted {
		err = t.p.Finish(ctx, channelID, handle, m)
	} else {
		err = t.p.Post(ctx, channelID, m)
	}
	t.mu.Lock()
	if err == nil {
		t.removeLocked(d) // D10: the final clears the message's state
	} else {
		// Keep the handle: the retry of this final must finish the same
		// temporary message, not post a second one (M11).
		d.finishing = false
		d.seen = t.clock.Now()
	}
	t.mu.Unlock()
	return err
}
