// Package codelabel bounds the metric label values that come from the
// peer — error codes and ack statuses — for the kit's default /metrics
// and the metrics module alike, so a hostile peer cannot grow the series
// without bound.
package codelabel

import (
	"sync"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// MaxExtra bounds the distinct codes outside the SDK's own that get a
// label value of their own; later ones are "other".
const MaxExtra = 32

// Codes gives codes their label values: the SDK's codes, then up to
// MaxExtra well-formed others in the order first seen, then "other". The
// zero value is ready; it is safe for concurrent use.
type Codes struct {
	mu    sync.Mutex
	extra map[imv2.Code]struct{}
}

// Label returns code's label value.
func (c *Codes) Label(code imv2.Code) string {
	if _, ok := known[code]; ok {
		return string(code)
	}
	if !wellFormed(code) {
		return "other"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.extra[code]; ok {
		return string(code)
	}
	if len(c.extra) < MaxExtra {
		if c.extra == nil {
			c.extra = map[imv2.Code]struct{}{}
		}
		c.extra[code] = struct{}{}
		return string(code)
	}
	return "other"
}

// Status bounds an ack status to the three the profile defines, else
// "other".
func Status(s imv2.AckStatus) string {
	switch s {
	case imv2.AckAccepted, imv2.AckDuplicate, imv2.AckRejected:
		return string(s)
	}
	return "other"
}

// wellFormed accepts what codes look like on the wire: 1 to 64 bytes of
// lowercase letters, digits and underscores.
func wellFormed(code imv2.Code) bool {
	if len(code) == 0 || len(code) > 64 {
		return false
	}
	for _, r := range []byte(code) {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

var known = map[imv2.Code]struct{}{
	imv2.CodeInvalidPacket: {}, protocol.CodeHelloRequired: {}, protocol.CodeConnectorCardIDMismatch: {},
	protocol.CodeConnectorIDMismatch: {}, imv2.CodeChannelNotOpen: {}, imv2.CodeChannelIDRequired: {},
	protocol.CodeChannelNotOwned: {}, protocol.CodeChannelConnectorMismatch: {}, imv2.CodeChannelUnavailable: {},
	protocol.CodeConnectionNotFound: {}, protocol.CodeConnectionNotAuthenticated: {}, protocol.CodeAuthSessionNotFound: {},
	protocol.CodeToolInvokeFailed: {}, imv2.CodeUnsupportedPacket: {}, imv2.CodeDeltaSequenceGap: {},
	imv2.CodeDeltaSequenceConflict: {}, imv2.CodeDeltaLimitExceeded: {}, imv2.CodeMessageIDConflict: {},
	imv2.CodeForbiddenField: {}, imv2.CodeTargetDeliveryFailed: {}, imv2.CodeTargetRejected: {},
	imv2.CodePendingFull: {}, imv2.CodeClosed: {}, imv2.CodeExpired: {}, imv2.CodeChannelBusy: {},
	imv2.CodeDeliveryOutcomeUnknown: {},
}
