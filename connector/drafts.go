package connector

import (
	"context"
	"slices"

	"github.com/xagentkit/imv2/state"
)

// The kit keeps the handle of every draft it shows in the channel's
// state.Binding.Drafts (M11): written once, when a message's first draft is
// shown, and removed once, when its final is shown or the draft discarded.
// A final that arrives after a restart — the display package has forgotten
// the draft then — finds the handle there and finishes that draft instead
// of posting a second message.

// rememberDraft records handle as the draft of messageID, the oldest
// record going when the binding holds state.MaxBindingDrafts. A failure only
// costs the restart case, so it is logged.
func (o *outbound) rememberDraft(ctx context.Context, channelID, messageID, handle string) {
	err := o.k.UpdateBinding(ctx, channelID, func(b *state.Binding) error {
		b.Drafts = slices.DeleteFunc(b.Drafts, func(d state.DraftHandle) bool { return d.MessageID == messageID })
		b.Drafts = append(b.Drafts, state.DraftHandle{MessageID: messageID, Handle: handle})
		if n := len(b.Drafts) - state.MaxBindingDrafts; n > 0 {
			b.Drafts = b.Drafts[n:]
		}
		return nil
	})
	if err != nil {
		o.k.log.Warn("connector: draft handle not recorded; a restart before the final shows it twice", "connector_channel_id", channelID, "err", err)
	}
}

// recordedDraft returns the handle recorded for messageID.
func (o *outbound) recordedDraft(ctx context.Context, channelID, messageID string) (string, bool) {
	b, ok, err := o.k.store.Binding(ctx, channelID)
	if err != nil || !ok {
		return "", false
	}
	i := slices.IndexFunc(b.Drafts, func(d state.DraftHandle) bool { return d.MessageID == messageID })
	if i < 0 {
		return "", false
	}
	return b.Drafts[i].Handle, true
}

// forgetDraft removes the records match selects; no write when none does.
func (o *outbound) forgetDraft(ctx context.Context, channelID string, match func(state.DraftHandle) bool) {
	b, ok, err := o.k.store.Binding(ctx, channelID)
	if err != nil || !ok || !slices.ContainsFunc(b.Drafts, match) {
		return
	}
	err = o.k.UpdateBinding(ctx, channelID, func(b *state.Binding) error {
		b.Drafts = slices.DeleteFunc(b.Drafts, match)
		return nil
	})
	if err != nil {
		o.k.log.Warn("connector: draft handle not removed", "connector_channel_id", channelID, "err", err)
	}
}
