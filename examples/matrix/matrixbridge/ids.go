package matrixbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// MessageIDPrefix starts every message_id the Connector derives from a
// Matrix event.
const MessageIDPrefix = "mx_"

// MessageID derives the message_id of a user message from its Matrix room
// and event ID (I4, M2): the same event always gives the same ID, so a
// /sync replayed after a restart resends the same business message, which
// both the pending queue and xAgent deduplicate, instead of creating a
// second one. The hash keeps the ID short (event IDs may be 255 bytes) and
// opaque.
func MessageID(roomID, eventID string) string {
	sum := sha256.Sum256([]byte(roomID + "\x00" + eventID))
	return MessageIDPrefix + hex.EncodeToString(sum[:20])
}

// txnKey is the stable part of every transaction ID of one assistant
// message: derived from the channel and the message_id, so a resend of the
// final — by the SDK's retry, or by xAgent after a Connector restart —
// reuses the same Matrix transaction IDs and the homeserver returns the
// event it already created instead of a second one.
func txnKey(channelID, messageID string) string {
	sum := sha256.Sum256([]byte(channelID + "\x00" + messageID))
	return "imv2_" + hex.EncodeToString(sum[:16])
}

// The transaction ID of each event of one assistant message.
//
// The final's text has one ID whichever way it is shown — a new event
// (Send) or the edit that turns the draft into the final (Finish) — so a
// restart between the two can never show the final text twice: the
// homeserver answers the second request with the first event.
func txnText(key string) string    { return key + "_t" }
func txnDraft(key string) string   { return key + "_d" }
func txnDiscard(key string) string { return key + "_x" }
func txnFile(key string, i int) string {
	return key + "_f" + strconv.Itoa(i)
}
