package connector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector/internal/display"
	"github.com/xagentkit/imv2/internal/answered"
	"github.com/xagentkit/imv2/internal/port"
)

// DefaultShutdownGrace is the grace the reference commands give Shutdown
// on SIGTERM: under Kubernetes' default terminationGracePeriodSeconds
// (30 s), so the process exits by itself before it is killed.
const DefaultShutdownGrace = 25 * time.Second

// Drained is what a Shutdown let finish and what it turned away.
type Drained struct {
	// Finished counts the finals whose platform call was in flight when
	// Shutdown began and ended within the grace: their acks were sent.
	Finished int
	// Cut counts the finals still in flight when the grace ended: Close
	// cancelled them, as it cancels everything.
	Cut int
	// Refused counts the finals and channel.opens answered with a
	// retryable refusal meanwhile: xAgent sends them again after the
	// restart.
	Refused int
}

// String is the one line the commands log at exit.
func (d Drained) String() string {
	return fmt.Sprintf("%d finals finished, %d cut off, %d refused for retry", d.Finished, d.Cut, d.Refused)
}

// errShuttingDown refuses new work while draining: retryable, and marked
// "not posted", so the Channel releases the final's claim and xAgent's
// resend after the restart is posted (not delivery_outcome_unknown).
var errShuttingDown = imv2.NotPosted(errors.New("connector: shutting down; send it again after the restart"))

// drain counts the finals in the platform's hands and, once stopping,
// refuses new ones, so Shutdown can wait for exactly those it let in.
type drain struct {
	mu       sync.Mutex
	stopping bool
	inflight map[finalKey]int // finals admitted and not yet answered
	n        int              // their sum
	idle     chan struct{}    // closed when n reaches 0 while stopping
	begun    chan struct{}    // closed by stop; made on demand (tests wait on it)
	d        Drained
}

// finalKey names a final across channels.
type finalKey struct{ channel, message string }

// isStopping reports whether stop was called.
func (dr *drain) isStopping() bool {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	return dr.stopping
}

// stopped returns a channel closed once stop has been called.
func (dr *drain) stopped() <-chan struct{} {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.begun == nil {
		dr.begun = make(chan struct{})
		if dr.stopping {
			close(dr.begun)
		}
	}
	return dr.begun
}

// begin admits a final's platform call, or refuses it while stopping.
// It stays counted until answered sees the Channel's verdict on it.
func (dr *drain) begin(k finalKey) error {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.stopping {
		dr.d.Refused++
		return errShuttingDown
	}
	if dr.inflight == nil {
		dr.inflight = map[finalKey]int{}
	}
	dr.inflight[k]++
	dr.n++
	return nil
}

// answered ends the count of an admitted final: the Channel recorded its
// outcome and handed its ack to the connection (answered.Observer), so
// Close's close frame goes after it.
func (dr *drain) answered(k finalKey) {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.inflight[k] == 0 {
		return // not admitted here: refused, or answered without a Target call
	}
	if dr.inflight[k]--; dr.inflight[k] == 0 {
		delete(dr.inflight, k)
	}
	dr.n--
	if !dr.stopping {
		return
	}
	dr.d.Finished++
	if dr.n == 0 && dr.idle != nil {
		close(dr.idle)
		dr.idle = nil
	}
}

// observer is the Observer every Channel gets: it passes events to next
// (the author's Observer, or nil) and ends the count of a final once its
// acks were handed to the connection.
func (dr *drain) observer(next imv2.Observer) imv2.Observer {
	return drainObserver{dr, next}
}

type drainObserver struct {
	dr   *drain
	next imv2.Observer
}

// Observe passes e on.
func (o drainObserver) Observe(e imv2.Event) {
	if o.next != nil {
		o.next.Observe(e)
	}
}

// Answered implements answered.Observer: the Channel calls it after the
// acks of a delivery were written or queued before any later frame.
func (o drainObserver) Answered(channelID, messageID string) {
	o.dr.answered(finalKey{channelID, messageID})
	if a, ok := o.next.(answered.Observer); ok {
		a.Answered(channelID, messageID)
	}
}

// open refuses a channel.open while stopping: retryable, so xAgent opens
// it again on the next process.
func (dr *drain) open() error {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if !dr.stopping {
		return nil
	}
	dr.d.Refused++
	return &imv2.Error{Code: imv2.CodeChannelUnavailable, Message: "connector shutting down; open it again after the restart", Retryable: true}
}

// stop begins refusing and returns a channel closed once no final is in
// the platform's hands.
func (dr *drain) stop() <-chan struct{} {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if !dr.stopping && dr.begun != nil {
		close(dr.begun)
	}
	dr.stopping = true
	idle := make(chan struct{})
	if dr.n == 0 {
		close(idle)
	} else {
		dr.idle = idle
	}
	return idle
}

// report is the count so far, with what is still in flight as cut.
func (dr *drain) report() Drained {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	d := dr.d
	d.Cut = dr.n
	return d
}

// CutWait is how long Shutdown waits for Close once its ctx ended: a
// platform call that ignores its context would hold Close for ever, so
// Shutdown returns after it and leaves that call running (the process is
// about to exit). Shutdown thus returns within ctx's deadline plus
// CutWait.
const CutWait = 500 * time.Millisecond

// Shutdown stops the Connector gracefully: it stops taking new work (a
// new final is refused retryable, its claim released, and a channel.open
// is answered connector_channel_unavailable: xAgent sends both again after
// the restart), waits until every final already in the platform's hands
// has its outcome recorded and its ack handed to the connection, or ctx
// ends, then Closes, which closes every WebSocket with a close frame after
// the frames already accepted: the ack of a drained final leaves before
// it (a final shown once, with nothing for xAgent to resend). Requests other
// than /ws are served meanwhile. It returns what was drained and, when
// ctx ended first, ctx's error: the finals still in flight are cancelled
// as by Close and counted Cut.
//
// Shutdown returns at most CutWait after ctx ends, even when a platform
// call ignores its context and so holds Close: Close goes on in the
// background, the call is left running, and the claim of a final it was
// posting stays in the Store for the restart to settle (its resend is
// reported delivery_outcome_unknown unless the platform can tell it was
// posted, S8). Exit the process after it. Give it DefaultShutdownGrace
// on SIGTERM.
func (c *Connector) Shutdown(ctx context.Context) (Drained, error) {
	var err error
	select {
	case <-c.drain.stop():
	case <-ctx.Done():
		err = ctx.Err()
	}
	d := c.drain.report()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case cerr := <-closed:
		return d, errors.Join(err, cerr)
	case <-ctx.Done():
	}
	cut := time.NewTimer(CutWait) // wall time: it bounds the process's exit
	defer cut.Stop()
	select {
	case cerr := <-closed:
		return d, errors.Join(ctx.Err(), cerr)
	case <-cut.C:
	}
	c.log.Warn("connector: shutdown cut off platform calls that ignore their context; their claims stay for the restart to settle",
		"cut", d.Cut)
	return d, ctx.Err()
}

// drainTarget is the Target every Channel gets: the display Target, whose
// finals Shutdown admits and counts, with its drafts and activity
// promoted, and the author's platform's dedup answers (outbound.go).
type drainTarget struct {
	*display.Target
	c *Connector
}

// The capabilities the Channel finds on the kit's Target (the display
// Target's drafts and activity, outbound's dedup answers); a signature that
// drifts from the Channel's fails to compile here, not silently at run time.
var (
	_ port.StreamingTarget                   = drainTarget{}
	_ port.ActivityTarget[imv2.ChatActivity] = drainTarget{}
	_ port.IdempotentTarget                  = drainTarget{}
	_ port.PostCheckTarget                   = drainTarget{}
)

// PostsIdempotently answers for the author's platform (IdempotentPlatform).
func (t drainTarget) PostsIdempotently() bool { return t.c.out.PostsIdempotently() }

// WasPosted asks the author's platform (PostChecker).
func (t drainTarget) WasPosted(ctx context.Context, channelID, key string) (bool, error) {
	return t.c.out.WasPosted(ctx, channelID, key)
}

// PostMessage is the display Target's, unless the Connector is shutting
// down.
func (t drainTarget) PostMessage(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	return t.c.admitFinal(finalKey{channelID, m.MessageID}, func() error { return t.Target.PostMessage(ctx, channelID, m) })
}

// admitFinal runs post, a final's platform call, unless the Connector is
// shutting down, counting it for Shutdown until its outcome is recorded.
func (c *Connector) admitFinal(k finalKey, post func() error) error {
	if err := c.drain.begin(k); err != nil {
		return err
	}
	return post()
}

// admitOpen chains the shutdown refusal before hook, a channel.open
// hook (nil: none).
func (c *Connector) admitOpen(hook func(context.Context, string) error) func(context.Context, string) error {
	return func(ctx context.Context, id string) error {
		if err := c.drain.open(); err != nil {
			return err
		}
		if hook == nil {
			return nil
		}
		return hook(ctx, id)
	}
}
