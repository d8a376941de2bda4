package tgbridge

// errors.go is the one file that speaks the kit's error contract
// (connector.Platform's table): how a Bot API answer becomes "refused",
// "not posted, wait" or "unknown", and which failed inbound updates are
// worth another try. A change of the kit's error helpers is made here alone.

import (
	"errors"
	"net"
	"strings"
	"time"

	ta "github.com/mymmrac/telego/telegoapi"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
)

// apiError is err's Bot API answer, if it is one.
func apiError(err error) (*ta.Error, bool) {
	var e *ta.Error
	return e, errors.As(err, &e)
}

// mark turns a Bot API call's failure into the kit's contract:
//
//	429 Too Many Requests   not applied; the kit waits retry_after (at least 1 s)
//	any other 4xx           refused for good (a bad request, a chat that is gone,
//	                        the bot blocked or removed: 403)
//	5xx, transport errors   unknown: a message may have been sent (the kit retries
//	                        drafts and edits, and a final only when it cannot show twice)
func mark(err error) error {
	if d, ok := retryAfter(err); ok {
		return imv2.RetryAfter(err, d)
	}
	if e, ok := apiError(err); ok && e.ErrorCode >= 400 && e.ErrorCode < 500 {
		return imv2.Refused(err)
	}
	return err
}

// notApplied reports whether err, a call's failure, says Telegram did not
// apply the call: a 4xx answer (429 included) or a dial error.
func notApplied(err error) bool {
	var op *net.OpError
	e, ok := apiError(err)
	return (ok && e.ErrorCode >= 400 && e.ErrorCode < 500) || (errors.As(err, &op) && op.Op == "dial")
}

// notPosted marks an error of a call that did not reach Telegram.
func notPosted(err error) error { return imv2.NotPosted(err) }

// refused marks an error the kit must not retry.
func refused(err error) error { return imv2.Refused(err) }

// retryAfter is how long a 429 answer asks to wait.
func retryAfter(err error) (time.Duration, bool) {
	e, ok := apiError(err)
	if !ok || e.ErrorCode != 429 {
		return 0, false
	}
	d := time.Second
	if e.Parameters != nil && e.Parameters.RetryAfter > 1 {
		d = time.Duration(e.Parameters.RetryAfter) * time.Second
	}
	return d, true
}

// unsupported reports that the server has no such method: Telegram's
// 404 "Not Found", or telegram-test-api's "API method '…' is not supported".
func unsupported(err error) bool {
	e, ok := apiError(err)
	return ok && (e.ErrorCode == 404 || strings.Contains(e.Description, "is not supported"))
}

// notModified is the 400 Telegram answers an edit to the text shown.
func notModified(err error) bool {
	e, ok := apiError(err)
	return ok && strings.Contains(e.Description, "message is not modified")
}

// retryUpdate reports whether an update whose hand-over to the kit failed
// with err is tried again (a store or channel hiccup, a store closed: the
// next run takes it) rather than skipped (no channel bound to its chat, or
// refused for good). Handing the same update over again is safe whatever
// the error: the kit dedups it.
func retryUpdate(err error) bool {
	return errors.Is(err, imv2.ErrClosed) || !errors.Is(err, connector.ErrNotBound) && !imv2.IsRefused(err)
}
