package dataplane

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/xfiles"
)

// MaxUploadAttempts bounds the tries of one Client.Upload: a refusal for
// now (409 channel_not_open, 408, 429, 5xx, a broken connection) is tried
// again after ReconnectMin doubling up to ReconnectMax, this many times
// in all, unless ctx ends first.
const MaxUploadAttempts = 6

// Upload sends a file for an assistant final of channel channelID to the
// Connector (POST /files/uploads, M7, T1) and returns the files[] entry
// to put into the final. It waits until the channel is open (WaitOpen),
// follows a channel the Connector replaced (W5), and retries what the
// Connector refused for now — 409 channel_not_open (the Connector had not
// yet seen the reopen), 408, 429, 5xx, a broken connection — with the
// reconnect backoff, MaxUploadAttempts in all, rewinding body for each
// try. A permanent refusal (401, 413, a malformed answer …) is returned
// at once; so is ctx's end.
func (c *Client) Upload(ctx context.Context, channelID, filename string, body io.ReadSeeker) (imv2.File, error) {
	start, err := body.Seek(0, io.SeekCurrent)
	if err != nil {
		return imv2.File{}, imv2.Refused(fmt.Errorf("dataplane: upload body: %w", err))
	}
	var last error
	for attempt := 1; attempt <= MaxUploadAttempts; attempt++ {
		if attempt > 1 {
			if err := c.sleepCtx(ctx, c.backoff(attempt-1)); err != nil {
				return imv2.File{}, err
			}
			if _, err := body.Seek(start, io.SeekStart); err != nil {
				return imv2.File{}, imv2.Refused(fmt.Errorf("dataplane: upload body: %w", err))
			}
		}
		id, err := c.WaitOpen(ctx, channelID)
		if err != nil {
			return imv2.File{}, err
		}
		q := xfiles.UploadRequest{BaseURL: c.base, APIKey: c.cfg.APIKey, ChannelID: id, Filename: filename, Body: body}
		res, err := q.Do(ctx, c.uploadHTTP)
		if err == nil {
			return res.File(), nil
		}
		if ctx.Err() != nil || !retryUpload(err) {
			return imv2.File{}, err
		}
		last = err
		c.log.Info("dataplane: upload refused for now; retrying", "connector_channel_id", id, "attempt", attempt, "err", err)
	}
	return imv2.File{}, fmt.Errorf("dataplane: upload gave up after %d attempts: %w", MaxUploadAttempts, last)
}

// retryUpload reports whether an upload failure is one to try again:
// xfiles marks 409 channel_not_open, 408, 429, 5xx and transport
// failures NotPosted, everything else Refused.
func retryUpload(err error) bool { return imv2.SafeToRetry(err) }

// sleepCtx waits d on the client's clock: ctx's error if ctx ends first,
// imv2.ErrClosed if the client closes.
func (c *Client) sleepCtx(ctx context.Context, d time.Duration) error {
	fired := make(chan struct{})
	t := c.clock.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return imv2.ErrClosed
	}
}
