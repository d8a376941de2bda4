package pgstore

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/pendingcodec"
)

// A pending row's message column is a zero byte, the encoding's version
// and the entry in the SDK's pending-entry encoding (internal/pendingcodec,
// the one boltstore keeps), so the two stores agree byte for byte and a
// decoder is strict and fuzzed once. Rows written before this build hold
// the message gob-encoded; a gob stream opens with a message's byte
// count, never zero, so the first byte tells them apart and those rows
// are still read (their Created comes from the row's columns). They are
// not rewritten: a pending entry lives until its ack or its TTL, so they
// leave by themselves.
const codecMark = 0x00

func appendPending(b []byte, e *imv2.PendingEntry) []byte {
	b = append(b, codecMark, pendingcodec.Version)
	return pendingcodec.Append(b, e)
}

// decodePending reads a message column: the versioned encoding, or a gob
// stream of a row written before it.
func decodePending(channelID string, sec int64, nsec int32, msg []byte) (imv2.PendingEntry, error) {
	if len(msg) > 0 && msg[0] == codecMark {
		if len(msg) < 2 || msg[1] != pendingcodec.Version {
			return imv2.PendingEntry{}, fmt.Errorf("%w: encoding version %x, this build reads %d", pendingcodec.ErrCorrupt, msg[1:min(len(msg), 2)], pendingcodec.Version)
		}
		return pendingcodec.Decode(channelID, msg[2:])
	}
	e := imv2.PendingEntry{ChannelID: channelID, Created: time.Unix(sec, int64(nsec)).UTC()}
	if err := gob.NewDecoder(bytes.NewReader(msg)).Decode(&e.Message); err != nil {
		return imv2.PendingEntry{}, fmt.Errorf("gob row: %w", err)
	}
	return e, nil
}
