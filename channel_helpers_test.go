package imv2

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/testwait"
)

// wait bounds how long a test waits for an asynchronous outcome before it
// fails; it is a deadline, never an assertion on speed.
const wait = 5 * time.Second

var t0 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// wire records what a channel sends, and lets a test wait for it.
type wire struct {
	mu   sync.Mutex
	pkts []*Packet
	ch   chan *Packet
	fail error
}

func newWire() *wire { return &wire{ch: make(chan *Packet, 1024)} }

func (w *wire) Send(_ context.Context, p *Packet) error {
	w.mu.Lock()
	err := w.fail
	w.mu.Unlock()
	if err != nil {
		return err
	}
	// Round-trip through the codec, as a real wire would.
	b, err := p.Encode()
	if err != nil {
		return err
	}
	q, err := DecodePacket(b)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.pkts = append(w.pkts, q)
	w.mu.Unlock()
	w.ch <- q
	return nil
}

// next returns the next packet sent, failing the test after wait.
func (w *wire) next(t *testing.T) *Packet {
	t.Helper()
	select {
	case p := <-w.ch:
		return p
	case <-time.After(wait):
		t.Fatal("no packet sent")
		return nil
	}
}

// none fails if a packet is waiting. Call it after the channel quiesced.
func (w *wire) none(t *testing.T) {
	t.Helper()
	select {
	case p := <-w.ch:
		t.Fatalf("unexpected packet %s %s", p.Type, p.Payload)
	default:
	}
}

// recTarget records what a Target was asked to do.
type recTarget struct {
	mu     sync.Mutex
	posts  []ChatMessage
	drafts []string
	acts   []ChatActivity
	gate   chan struct{} // when set, PostMessage waits for it
	err    error
	posted chan string
}

func newRecTarget() *recTarget { return &recTarget{posted: make(chan string, 1024)} }

func (r *recTarget) PostMessage(ctx context.Context, _ string, m *ChatMessage) error {
	r.mu.Lock()
	gate, err := r.gate, r.err
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	c := *m
	c.Raw = nil // posts compare what was shown; Raw has tests of its own (E5)
	r.posts = append(r.posts, c)
	r.mu.Unlock()
	r.posted <- m.MessageID
	return nil
}

func (r *recTarget) postCount(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.posts {
		if m.MessageID == id {
			n++
		}
	}
	return n
}

// streamTarget adds drafts and activity.
type streamTarget struct {
	*recTarget
	drafted chan string
	acted   chan ChatActivity
	actErr  error
}

func newStreamTarget() *streamTarget {
	return &streamTarget{recTarget: newRecTarget(), drafted: make(chan string, 1024), acted: make(chan ChatActivity, 1024)}
}

func (s *streamTarget) UpdateDraft(_ context.Context, _, _, text string) error {
	s.mu.Lock()
	s.drafts = append(s.drafts, text)
	s.mu.Unlock()
	s.drafted <- text
	return nil
}

func (s *streamTarget) SetActivity(_ context.Context, _ string, a ChatActivity) error {
	s.mu.Lock()
	s.acts = append(s.acts, a)
	err := s.actErr
	s.mu.Unlock()
	s.acted <- a
	return err
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	return testwait.Recv(t, ch, wait)
}

func imNegotiated() *Negotiated {
	return DefaultCatalog().Negotiate([]string{ProfileIMv2}, []string{ProfileIMv2})
}

// newConnector returns a Connector-role channel on a recording wire.
func newConnector(t *testing.T, target Target, o *Options) (*Channel, *wire, *fakeclock.Clock) {
	t.Helper()
	return newTestChannel(t, RoleConnector, target, o)
}

// newXAgent returns an xAgent-role channel on a recording wire.
func newXAgent(t *testing.T, target Target, o *Options) (*Channel, *wire, *fakeclock.Clock) {
	t.Helper()
	return newTestChannel(t, RoleXAgent, target, o)
}

// newTestChannel returns channel cch_1 in role on a recording wire, timed
// by a fake clock unless o brings one.
func newTestChannel(t *testing.T, role Role, target Target, o *Options) (*Channel, *wire, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New(t0)
	if o == nil {
		o = &Options{}
	}
	if o.Clock == nil {
		o.Clock = clk
	}
	w := newWire()
	c, err := NewChannel("cch_1", role, imNegotiated(), w, target, o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, w, clk
}

func finalPacket(t *testing.T, id, text string) *Packet {
	t.Helper()
	p, err := NewChatMessage("cch_1", ToConnector, ChatMessage{MessageID: id, Text: text})
	require.NoError(t, err)
	return p
}

func userPacket(t *testing.T, id, text string) *Packet {
	t.Helper()
	p, err := NewChatMessage("cch_1", ToXAgent, ChatMessage{MessageID: id, Text: text})
	require.NoError(t, err)
	return p
}

func deltaPacket(t *testing.T, id string, seq int64, text string) *Packet {
	t.Helper()
	p, err := NewChatMessageDelta("cch_1", ChatMessageDelta{MessageID: id, Sequence: seq, Text: text})
	require.NoError(t, err)
	return p
}

func activityPacket(t *testing.T, s ActivityStatus, tool string) *Packet {
	t.Helper()
	p, err := newChatActivity("cch_1", ChatActivity{Status: s, ToolName: tool})
	require.NoError(t, err)
	return p
}

// ackOf decodes an ack packet and checks it answers orig (A1, A2).
func ackOf(t *testing.T, orig, p *Packet) *ChatMessageAck {
	t.Helper()
	require.Equal(t, TypeChatMessageAck, p.Type, "payload %s", p.Payload)
	a, err := DecodeChatMessageAck(p)
	require.NoError(t, err)
	require.Equal(t, orig.PacketID, p.ReplyTo, "A1: reply_to")
	require.Equal(t, orig.ConnectorChannelID, p.ConnectorChannelID, "A2: channel")
	return a
}
