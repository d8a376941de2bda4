package imv2

import (
	"errors"
	"time"

	"context"
	"fmt"
	"github.com/xagentkit/imv2/clock"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// pump is a Transport that hands every packet, encoded and decoded as on
// a socket, to a peer Channel from a goroutine of its own, in the order
// Send was called: a WebSocket's single writer and reader.
type pump struct {
	ch   chan *Packet
	done chan struct{}
}

func newPump(t *testing.T, to func() *Channel) *pump {
	p := &pump{ch: make(chan *Packet, 4096), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for q := range p.ch {
			_ = to().Receive(context.Background(), q)
		}
	}()
	return p
}

func (p *pump) Send(_ context.Context, q *Packet) error {
	b, err := q.Encode()
	if err != nil {
		return err
	}
	d, err := DecodePacket(b)
	if err != nil {
		return err
	}
	p.ch <- d
	return nil
}

// seqTarget records the message IDs posted, in order; the first post of
// each ID in refuse fails not applied (NotPosted), so the sender resends it.
type seqTarget struct {
	mu     sync.Mutex
	ids    []string
	all    chan struct{}
	n      int
	refuse map[string]bool
}

func (o *seqTarget) PostMessage(_ context.Context, _ string, m *ChatMessage) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.refuse[m.MessageID] {
		delete(o.refuse, m.MessageID)
		return NotPosted(errors.New("agent busy"))
	}
	o.ids = append(o.ids, m.MessageID)
	if len(o.ids) == o.n {
		close(o.all)
	}
	return nil
}

// sendInOrder hands n user messages one after another to a Connector's
// Channel.Send, linked to an xAgent Channel, and returns the order they
// reached xAgent's Target in.
func sendInOrder(t *testing.T, n int) []string {
	t.Helper()
	return sendInOrderWindow(t, n, 0, nil)
}

// sendInOrderWindow is sendInOrder with a send window of window messages
// (0: the default), the receiver refusing the first post of each ID in
// refuse (not applied), and resends after a millisecond.
func sendInOrderWindow(t *testing.T, n, window int, refuse map[string]bool) []string {
	t.Helper()
	target := &seqTarget{all: make(chan struct{}), n: n, refuse: refuse}
	var snd, rcv *Channel
	toRcv := newPump(t, func() *Channel { return rcv })
	toSnd := newPump(t, func() *Channel { return snd })
	var err error
	rcv, err = NewChannel("cch_1", RoleXAgent, imNegotiated(), toSnd, target, &Options{})
	require.NoError(t, err)
	snd, err = NewChannel("cch_1", RoleConnector, imNegotiated(), toRcv, newRecTarget(),
		&Options{MaxUnacked: window, Clock: clock.System{}, RetryMin: time.Millisecond, RetryMax: 4 * time.Millisecond})
	require.NoError(t, err)
	defer func() {
		snd.Close()
		rcv.Close()
		close(toRcv.ch)
		close(toSnd.ch)
		<-toRcv.done
		<-toSnd.done
	}()
	for i := range n {
		_, err := snd.Send(context.Background(), ChatMessage{MessageID: fmt.Sprintf("u%03d", i+1), Text: "hi"})
		require.NoError(t, err)
	}
	recv(t, target.all)
	target.mu.Lock()
	defer target.mu.Unlock()
	return append([]string(nil), target.ids...)
}

// TestChannel_S2_SendOrderPastTheWindow: 100 user messages handed one
// after another to Send reach the receiver's Target in the order taken,
// though more than the send window (MaxUnacked, 64) are in flight: a
// message admitted to the window by an ack must not be overtaken by one
// Send admits at the same time.
func TestChannel_S2_SendOrderPastTheWindow(t *testing.T) {
	want := make([]string, 100)
	for i := range want {
		want[i] = fmt.Sprintf("u%03d", i+1)
	}
	trials := 50
	if testing.Short() {
		trials = 5
	}
	bad := 0
	for range trials {
		got := sendInOrder(t, 100)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			bad++
			t.Logf("out of order: %v", got[:min(len(got), 70)])
		}
	}
	require.Zero(t, bad, "%d of %d trials out of order", bad, trials)
}

// TestChannel_A8_S2_OrderAcrossResends: the receiver's Target refuses
// some user messages once (not applied): each is rejected retryable and
// resent, and the channel's later messages are held (channel_busy) until
// it was posted, so the Target still gets all 100 in the order Send took
// them.
func TestChannel_A8_S2_OrderAcrossResends(t *testing.T) {
	want := make([]string, 100)
	for i := range want {
		want[i] = fmt.Sprintf("u%03d", i+1)
	}
	for range 5 {
		got := sendInOrderWindow(t, 100, 0, map[string]bool{"u002": true, "u040": true, "u065": true, "u099": true})
		require.Equal(t, want, got)
	}
}

// TestChannel_S2_SendOrderWhenTheTransportArrivesMidDrain: messages Send
// took while the channel had no transport go out first when one is set,
// also when it is set while Send's drain holds a later message it took
// off the transmit queue (the order rule, package doc "Order"). A
// dataplane.Server answers channel.open before it gives the Channel the
// connection, so a Connector's first Sends may find no transport and the
// next one race SetTransport: xAgent got [u026 u001 … u025 u027 …].
func TestChannel_S2_SendOrderWhenTheTransportArrivesMidDrain(t *testing.T) {
	c, w, _ := newXAgent(t, newRecTarget(), nil)
	c.SetTransport(nil)
	ctx := context.Background()
	const n = 4
	for i := 1; i < n; i++ {
		_, err := c.Send(ctx, ChatMessage{MessageID: fmt.Sprintf("m%d", i), Text: "hi"})
		require.NoError(t, err)
	}
	w.none(t) // no transport: nothing went out

	last := fmt.Sprintf("m%d", n)
	fired := false
	hook := func(hc *Channel, id string) {
		if hc == c && id == last && !fired {
			fired = true
			c.SetTransport(w) // the connection arrives now, on another goroutine in production
		}
	}
	dequeuedHook.Store(&hook)
	t.Cleanup(func() { dequeuedHook.Store(nil) })
	_, err := c.Send(ctx, ChatMessage{MessageID: last, Text: "hi"})
	require.NoError(t, err)
	require.True(t, fired)

	var got []string
	for len(got) < n {
		p := recv(t, w.ch)
		m, err := DecodeChatMessage(p, ToConnector)
		require.NoError(t, err)
		got = append(got, m.MessageID)
	}
	require.Equal(t, []string{"m1", "m2", "m3", last}, got, "first transmissions in send order")
}
