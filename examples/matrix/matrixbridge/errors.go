package matrixbridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/xagentkit/imv2"
	"maunium.net/go/mautrix"
)

// matrixError is a homeserver failure with the request's URL, body and
// token-bearing details stripped: only the operation, the HTTP status and
// the Matrix errcode remain, so the text is safe in an ack (M8) and logs.
type matrixError struct {
	op      string
	status  int    // 0: no HTTP response (network, timeout)
	errcode string // M_FORBIDDEN, M_LIMIT_EXCEEDED …; may be empty
	cause   error
}

func (e *matrixError) Error() string {
	if e.status == 0 {
		return "matrix: " + e.op + ": homeserver unreachable"
	}
	return strings.TrimSpace(fmt.Sprintf("matrix: %s: HTTP %d %s", e.op, e.status, e.errcode))
}

// Unwrap keeps errors.Is(err, mautrix.MForbidden) working for callers.
func (e *matrixError) Unwrap() error { return e.cause }

// classify marks a mautrix error for the ack (A8): a rate limit (429, with
// the homeserver's retry_after_ms handed to the kit's pacing as
// imv2.RetryAfter), a homeserver error (5xx) or a failure without an
// HTTP response is retryable — the kit retries it in order; every other
// status (400, 401 token gone, 403 not in the room, 404, 413 too large)
// is permanent: the same request fails again. A nil err stays nil.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	me := &matrixError{op: op, cause: err}
	var he mautrix.HTTPError
	var wait float64
	if errors.As(err, &he) {
		if he.Response != nil {
			me.status = he.Response.StatusCode
		}
		if he.RespError != nil {
			me.errcode = he.RespError.ErrCode
			wait, _ = he.RespError.ExtraData["retry_after_ms"].(float64)
			if me.status == 0 {
				me.status = he.RespError.StatusCode
			}
		}
	}
	switch {
	case me.status == http.StatusTooManyRequests && wait > 0:
		return imv2.RetryAfter(me, time.Duration(wait)*time.Millisecond)
	case me.status == 0, me.status == http.StatusTooManyRequests, me.status >= 500,
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return imv2.NotPosted(me)
	}
	return imv2.Refused(me)
}

// statusOf returns the HTTP status of a classified error, 0 if none.
func statusOf(err error) int {
	var me *matrixError
	if errors.As(err, &me) {
		return me.status
	}
	return 0
}

// isAuthGone reports whether err says the access token no longer works
// (401 M_UNKNOWN_TOKEN or M_MISSING_TOKEN): the binding has expired.
func isAuthGone(err error) bool { return statusOf(err) == http.StatusUnauthorized }
