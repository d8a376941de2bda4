package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// frameConn feeds raw frames to a Server session, as a WebSocket whose
// frames passed the read limit would, and records every frame written.
type frameConn struct {
	frames [][]byte
	next   int

	mu     sync.Mutex
	out    [][]byte
	closed bool
}

func (c *frameConn) Read(context.Context) (*imv2.Packet, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.next == len(c.frames) {
		return nil, io.EOF
	}
	f := c.frames[c.next]
	c.next++
	return imv2.DecodePacket(f)
}

func (c *frameConn) Write(_ context.Context, p *imv2.Packet) error {
	b, err := p.Encode()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return imv2.ErrClosed
	}
	c.out = append(c.out, b)
	return nil
}

func (c *frameConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

// quietTarget takes everything and never blocks.
type quietTarget struct{}

func (quietTarget) PostMessage(context.Context, string, *imv2.ChatMessage) error { return nil }
func (quietTarget) UpdateDraft(context.Context, string, string, string) error    { return nil }

// FuzzServerFrames hands a Server session arbitrary frames (split on
// newlines): hello, channel.open, IM packets, garbage. The session must
// never panic, must end when the connection does, and everything it
// writes must be a valid packet; Close must leave nothing running.
func FuzzServerFrames(f *testing.F) {
	enc := func(typ, channel string, payload any) string {
		p, err := imv2.NewPacket(typ, channel, payload)
		if err != nil {
			f.Fatal(err)
		}
		p.RequestID = "req_" + p.PacketID
		b, err := p.Encode()
		if err != nil {
			f.Fatal(err)
		}
		return string(b)
	}
	hello := enc(protocol.TypeConnectorHello, "", goodHello(""))
	open := enc(protocol.TypeChannelOpen, "cch_fuzz", nil) // a registered ID: reused, so IM packets reach a Channel
	user := enc(imv2.TypeChatMessage, "cch_fuzz", map[string]any{"message_id": "m1", "text": "hi"})
	delta := enc(imv2.TypeChatMessageDelta, "cch_fuzz", map[string]any{"message_id": "m1", "sequence": 1, "text": "h"})
	ping := enc(protocol.TypePing, "", nil)
	f.Add([]byte(hello + "\n" + open))
	f.Add([]byte(hello + "\n" + open + "\n" + user + "\n" + delta))
	f.Add([]byte(user + "\n" + hello + "\n" + hello))
	f.Add([]byte(ping + "\nnot json\n\x00\xff"))
	f.Add([]byte(strings.Replace(hello, protocol.ProtocolVersion, "2.0", 1) + "\n" + open))
	f.Add([]byte(enc(imv2.TypeError, "", nil)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		reg := state.NewMemoryRegistry(0)
		_ = reg.Register(context.Background(), "cch_fuzz")
		srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return quietTarget{} }, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		c := &frameConn{frames: bytes.Split(data, []byte("\n"))}
		_ = srv.ServeConn(context.Background(), c)
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, b := range c.out {
			p, err := imv2.DecodePacket(b)
			if err != nil {
				t.Fatalf("the server wrote an invalid packet %s: %v", b, err)
			}
			if p.ReplyTo != "" && p.Type == imv2.TypeError && p.Err() == nil {
				t.Fatalf("error packet without error: %s", b)
			}
		}
	})
}

// FuzzDecodeCard: whatever a Connector serves at /connector-card.json,
// decoding it never panics, and a Card it accepts is valid and names its
// connector_card_id.
func FuzzDecodeCard(f *testing.F) {
	good, err := json.Marshal(testCard())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"schema":"xagent.connector.card/v1","connector_card_id":""}`))
	f.Add([]byte(`<html>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		card, err := decodeCard(body)
		if err != nil {
			return
		}
		if card.ConnectorCardID == "" || card.Validate() != nil {
			t.Fatalf("accepted an invalid Card: %s", body)
		}
	})
}
