package connector

import (
	"context"

	"github.com/google/uuid"

	"github.com/xagentkit/imv2"
)

// unknownSpace namespaces the message IDs of the outcome-unknown marks.
var unknownSpace = uuid.MustParse("9b3e6f0a-2c41-4d7e-8a15-6f0c2e9d4b73")

// unknownMarkID is the completed-record message ID under which the kit
// marks a final of the channel whose post may have been applied: derived
// from the final's message_id, so a resend finds it under the same
// channel (and a reopen's handover copies it with the channel's records).
func unknownMarkID(messageID string) string {
	return "unk_" + uuid.NewSHA1(unknownSpace, []byte(messageID)).String()
}

// markUnknown durably marks final m of channelID as "outcome unknown, ask
// before posting": one completed record in the Store (its TTL and cap),
// so a resend after the order hold went (OrderTTL, its LRU, a restart,
// another replica on the same Store) still asks the PostChecker first. A
// failed write is logged: the in-process hold still asks.
func (o *outbound) markUnknown(ctx context.Context, channelID string, m *imv2.ChatMessage) {
	if err := o.k.store.Record(context.WithoutCancel(ctx), channelID, unknownMarkID(m.MessageID), imv2.FingerprintOf(m)); err != nil {
		o.k.log.Warn("connector: outcome-unknown mark not stored; only this process's order hold asks before a resend", "connector_channel_id", channelID, "message_id", m.MessageID, "err", err)
	}
}

// markedUnknown reports whether final messageID of channelID was marked by
// markUnknown. The mark is never removed (completed records only expire):
// after its final was shown, a resend is answered duplicate by the
// Channel before it gets here, and at worst costs one PostChecker call.
func (o *outbound) markedUnknown(ctx context.Context, channelID, messageID string) (bool, error) {
	_, ok, err := o.k.store.Lookup(ctx, channelID, unknownMarkID(messageID))
	return ok, err
}
