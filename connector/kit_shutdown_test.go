package connector_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/protocol"
)

// slowPlatform holds every Post until release is closed (or the call's
// context ends, as a cancelled HTTP request would), counting the posts
// that were shown.
type slowPlatform struct {
	entered chan string
	release chan struct{}

	mu    sync.Mutex
	shown map[string]int
}

func newSlowPlatform() *slowPlatform {
	return &slowPlatform{entered: make(chan string, 8), release: make(chan struct{}), shown: map[string]int{}}
}

func (p *slowPlatform) Post(ctx context.Context, _ connector.Conversation, m *connector.Message) error {
	p.entered <- m.MessageID
	select {
	case <-p.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shown[m.MessageID]++
	return nil
}

func (p *slowPlatform) count(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shown[id]
}

// TestKit_W10_S8_ShutdownDrainsAFinalInFlight: Shutdown while a final's
// platform call is in progress refuses a new channel.open
// (connector_channel_unavailable, W10) and lets the call finish instead of
// cancelling it: the final is shown once and recorded completed (S8), so a
// resend after the restart is answered duplicate, not
// delivery_outcome_unknown; and its ack leaves before the close frame, so
// xAgent has nothing to resend.
func TestKit_W10_S8_ShutdownDrainsAFinalInFlight(t *testing.T) {
	p := newSlowPlatform()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "kit.db"), boltstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	k, err := connector.New(kitCard(""), p, &connector.Options{Store: st, DefaultConversation: func(id string) string { return id }})
	require.NoError(t, err)
	url, err := k.Start("127.0.0.1:0")
	require.NoError(t, err)
	a := newAgent()
	client, ch := a.dial(t, url)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := sendFinal(ctx, client, ch, imv2.ChatMessage{Text: "the slow one"})
	require.NoError(t, err)
	require.Equal(t, id, testwait.Recv(t, p.entered, 10*time.Second))

	type result struct {
		d   connector.Drained
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := k.Shutdown(ctx)
		done <- result{d, err}
	}()
	testwait.Recv(t, connector.ShutdownBegun(k), 10*time.Second)

	// One channel.open, by hand: Client.OpenChannel would retry this
	// refusal for now until ctx ends.
	open, err := imv2.NewPacket(protocol.TypeChannelOpen, "", nil)
	require.NoError(t, err)
	_, err = client.Request(ctx, open)
	var e *imv2.Error
	require.True(t, errors.As(err, &e), "a channel.open while draining is refused: %v", err)
	// An error packet has no retryable member (W10): the code says
	// "cannot serve now", and xAgent reopens on its next connect (W11).
	require.Equal(t, imv2.CodeChannelUnavailable, e.Code)

	close(p.release)
	r := testwait.Recv(t, done, 10*time.Second)
	require.NoError(t, r.err)
	require.Equal(t, connector.Drained{Finished: 1, Refused: 1}, r.d)
	require.Equal(t, 1, p.count(id), "the post was let finish, shown once")
	_, completed, err := st.Lookup(ctx, ch, id)
	require.NoError(t, err)
	require.True(t, completed, "S8: recorded completed, so a resend is a duplicate")
	// The socket is closed: the ack arrived before the close frame or
	// never will (the bound only guards against a hang).
	o := testwait.Recv(t, a.outcome, 5*time.Second)
	require.Equal(t, outcome{id: id, status: imv2.AckAccepted}, o, "the drained final's ack reached xAgent")
}

// stuckPlatform's Post ignores its context: it returns only once release
// is closed, as a platform client without deadlines would.
type stuckPlatform struct {
	entered chan string
	release chan struct{}
}

func (p *stuckPlatform) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p.entered <- m.MessageID
	<-p.release
	return nil
}

// TestKit_S8_ShutdownEndsWhenAPostIgnoresItsContext: Shutdown while a
// final's post ignores its context returns within its ctx plus CutWait,
// counting the final cut off and returning ctx's error, and leaves the
// final's claim in the Store (not completed: the restart settles it).
// Close goes on in the background and ends once the post returns.
func TestKit_S8_ShutdownEndsWhenAPostIgnoresItsContext(t *testing.T) {
	p := &stuckPlatform{entered: make(chan string, 8), release: make(chan struct{})}
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "kit.db"), boltstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	k, err := connector.New(kitCard(""), p, &connector.Options{Store: st, DefaultConversation: func(id string) string { return id }})
	require.NoError(t, err)
	url, err := k.Start("127.0.0.1:0")
	require.NoError(t, err)
	a := newAgent()
	client, ch := a.dial(t, url)
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := sendFinal(ctx, client, ch, imv2.ChatMessage{Text: "never answered"})
	require.NoError(t, err)
	require.Equal(t, id, testwait.Recv(t, p.entered, 10*time.Second))

	const grace = 200 * time.Millisecond
	sctx, scancel := context.WithTimeout(context.Background(), grace)
	defer scancel()
	began := time.Now()
	d, err := k.Shutdown(sctx)
	took := time.Since(began)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, connector.Drained{Cut: 1}, d)
	require.Less(t, took, grace+connector.CutWait+time.Second, "Shutdown returned within its grace plus CutWait")
	_, completed, err := st.Lookup(ctx, ch, id)
	require.NoError(t, err)
	require.False(t, completed, "the cut-off final is not recorded shown")

	close(p.release) // the background Close ends; goleak checks nothing is left
	require.NoError(t, k.Close())
	require.Eventually(t, func() bool { return connector.Closed(k) }, 10*time.Second, 10*time.Millisecond)
}
