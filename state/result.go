package state

import (
	"context"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/resultbound"
)

// MaxResultBytes bounds the result a ResultStore keeps with one record:
// a larger one is refused (invalid_packet) and nothing is recorded. With
// imv2.DefaultCompletedCap records it bounds what results can take to
// 100,000 × 16 KiB ≈ 1.6 GB (in a durable store's file or table; in the
// memory store the same per record).
const MaxResultBytes = resultbound.Max

// ResultStore is an imv2.CompletedStore that can keep a small result with
// a record: the data plane keeps a tool call's answer there (W13), so a
// replay after a restart gets the answer the call gave, not a second
// run. A Server whose completed store implements it (found by type
// assertion) uses it; the memory completed store
// (imv2.NewMemoryCompletedStore), boltstore and pgstore do.
//
// A result lives and goes with its record: the same share per
// connector_id and channel, eviction, TTL and DropChannel; Handover
// copies it with its record; a Record of the same message without a
// result drops the one kept.
type ResultStore interface {
	imv2.CompletedStore
	// RecordResult records the message as Record does and keeps result
	// (at most MaxResultBytes, else invalid_packet and nothing recorded)
	// with it, in one write.
	RecordResult(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, result []byte) error
	// LookupResult is Lookup that returns the record's result too: nil
	// for a record kept without one.
	LookupResult(ctx context.Context, channelID, messageID string) (fp imv2.Fingerprint, result []byte, ok bool, err error)
}
