package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// Limit tests of the data plane, named by what they bound. The frame size
// is covered by TestConn_W2_FrameOverReadLimitCloses1009 (inbound: close
// 1009) and TestConn_W2_WriteOverLimitRefused (outbound: invalid_packet,
// the connection stays up); the hello deadline by TestServer_HelloTimeout.

// TestLimit_ChannelsPerConnection: at MaxChannels open channels a further
// channel.open is refused with connector_channel_unavailable, and the open
// channels keep working: nothing was dropped to make room.
func TestLimit_ChannelsPerConnection(t *testing.T) {
	targets := map[string]*recTarget{}
	srv, err := NewServer(ServerConfig{
		Card: testCard(), MaxChannels: 2,
		NewTarget: func(id string) imv2.Target { targets[id] = newRecTarget(); return targets[id] },
	})
	require.NoError(t, err)
	defer srv.Close()
	p, _ := pipeSession(t, srv)
	p.hello("")
	a, b := p.open(""), p.open("")
	ans := p.call(protocol.TypeChannelOpen, "", nil)
	expectError(t, ans, imv2.CodeChannelUnavailable)
	require.Contains(t, ans.Error.Message, "the limit")
	require.ElementsMatch(t, []string{a, b}, srv.ChannelIDs())
	for _, id := range []string{a, b} {
		ack := p.call(imv2.TypeChatMessage, id, imv2.ChatMessage{MessageID: "f_" + id, Text: "still here"})
		require.Equal(t, imv2.TypeChatMessageAck, ack.Type)
		require.Equal(t, 1, targets[id].count("f_"+id))
	}
}

// TestLimit_W5_RefusedOpenRegistersNoID: a channel.open refused at the
// all-open cap leaves no ID in the Registry. It used to leave the ID it
// had issued, so a peer retrying at the cap filled the Registry (durable
// in boltstore and pgstore) and every later open was refused.
func TestLimit_W5_RefusedOpenRegistersNoID(t *testing.T) {
	reg := state.NewMemoryRegistry(4)
	srv, err := NewServer(ServerConfig{
		Card: testCard(), MaxChannels: 2, Registry: reg,
		NewTarget: func(string) imv2.Target { return newRecTarget() },
	})
	require.NoError(t, err)
	defer srv.Close()
	p, _ := pipeSession(t, srv)
	p.hello("")
	a, b := p.open(""), p.open("")
	for range 10 {
		ans := p.call(protocol.TypeChannelOpen, "", nil)
		expectError(t, ans, imv2.CodeChannelUnavailable)
		require.Contains(t, ans.Error.Message, "the limit")
	}
	held := reg.Len()
	require.Equal(t, 2, held, "the registry holds the two open channels only")
	p.call(protocol.TypeChannelClose, a, nil)
	c := p.open("") // room made by evicting a; the registry has room too
	require.ElementsMatch(t, []string{b, c}, srv.ChannelIDs())
}

// TestLimit_W5_RefusedOpenCallsNoStore: a channel.open refused at the
// all-open cap is refused before the Registry or NewTarget is asked, so a
// peer retrying at the cap costs no durable Known, Register or Forget (and
// runs no user code) per refused open. It used to cost them all.
func TestLimit_W5_RefusedOpenCallsNoStore(t *testing.T) {
	reg := &countingRegistry{ChannelRegistry: state.NewMemoryRegistry(0)}
	p := twoOpen(t, reg, 2)
	for i := range 10 {
		id := ""
		if i%2 == 1 {
			id = "cch_from_before_a_restart" // a reopen asks Known first
		}
		expectError(t, p.call(protocol.TypeChannelOpen, id, nil), imv2.CodeChannelUnavailable)
	}
	require.EqualValues(t, 0, reg.knowns.Load(), "Known calls")
	require.EqualValues(t, 2, reg.registers.Load(), "Register calls")
	require.EqualValues(t, 0, reg.forgets.Load(), "Forget calls")
	require.EqualValues(t, 2, reg.targets.Load(), "NewTarget calls")
}

// TestLimit_W5_RegistryRefusalIsAskedOnce: a channel.open the Registry
// refuses (full) asks it once. The retry of a reopen that raced a drop
// (errStaleKnown) matched every connector_channel_unavailable error, so
// each refused open asked the Registry three times.
func TestLimit_W5_RegistryRefusalIsAskedOnce(t *testing.T) {
	reg := &countingRegistry{ChannelRegistry: state.NewMemoryRegistry(2)}
	p := twoOpen(t, reg, 0)
	for range 10 {
		ans := p.call(protocol.TypeChannelOpen, "", nil)
		expectError(t, ans, imv2.CodeChannelUnavailable)
		require.Contains(t, ans.Error.Message, "registry")
	}
	require.EqualValues(t, 12, reg.registers.Load(), "Register calls")
}

// TestLimit_W5_AmbiguousRegisterLeavesNoID: a Register that fails
// otherwise than by a refusal may have committed (a connection lost during
// COMMIT); the ID is forgotten again, so refused opens cannot fill the
// registry with IDs of no channel. A refusal (the cap) is not followed by
// a Forget.
func TestLimit_W5_AmbiguousRegisterLeavesNoID(t *testing.T) {
	mem := state.NewMemoryRegistry(4)
	srv, err := NewServer(ServerConfig{
		Card: testCard(), Registry: committedThenFailed{mem},
		NewTarget: func(string) imv2.Target { return newRecTarget() },
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	p, _ := pipeSession(t, srv)
	p.hello("")
	for range 10 {
		require.Equal(t, imv2.TypeError, p.call(protocol.TypeChannelOpen, "", nil).Type)
	}
	held := mem.Len()
	require.Zero(t, held, "IDs of no channel left in the registry")

	full := &countingRegistry{ChannelRegistry: state.NewMemoryRegistry(2)}
	p = twoOpen(t, full, 0)
	expectError(t, p.call(protocol.TypeChannelOpen, "", nil), imv2.CodeChannelUnavailable)
	require.Zero(t, full.forgets.Load(), "a refusal is not followed by a Forget")
}

// committedThenFailed registers every ID, then reports a failure, as a
// store whose COMMIT went through and whose answer was lost does.
type committedThenFailed struct{ *state.MemoryRegistry }

func (r committedThenFailed) Register(ctx context.Context, id string) error {
	if err := r.MemoryRegistry.Register(ctx, id); err != nil {
		return err
	}
	return errors.New("connection reset during commit")
}

// twoOpen is a peer with two channels open on a Server with reg, which
// also counts the Server's NewTarget calls, and maxChannels.
func twoOpen(t *testing.T, reg *countingRegistry, maxChannels int) *pipePeer {
	t.Helper()
	srv, err := NewServer(ServerConfig{
		Card: testCard(), MaxChannels: maxChannels, Registry: reg,
		NewTarget: func(string) imv2.Target { reg.targets.Add(1); return newRecTarget() },
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	p, _ := pipeSession(t, srv)
	p.hello("")
	p.open("")
	p.open("")
	return p
}

// countingRegistry counts the Known, Register and Forget calls it passes
// on, and (twoOpen) the Server's NewTarget calls.
type countingRegistry struct {
	state.ChannelRegistry
	knowns, registers, forgets, targets atomic.Int32
}

func (r *countingRegistry) Known(ctx context.Context, id string) (bool, error) {
	r.knowns.Add(1)
	return r.ChannelRegistry.Known(ctx, id)
}

func (r *countingRegistry) Register(ctx context.Context, id string) error {
	r.registers.Add(1)
	return r.ChannelRegistry.Register(ctx, id)
}

func (r *countingRegistry) Forget(ctx context.Context, id string) error {
	r.forgets.Add(1)
	return r.ChannelRegistry.Forget(ctx, id)
}

// TestLimit_ConnectorIDsPerServer: with every connector_id slot online, a
// hello for a new one is refused with connector_id_mismatch; the online
// connection is untouched.
func TestLimit_ConnectorIDsPerServer(t *testing.T) {
	srv, err := NewServer(ServerConfig{Card: testCard(), MaxConnectors: 1, NewTarget: func(string) imv2.Target { return newRecTarget() }})
	require.NoError(t, err)
	defer srv.Close()
	first, firstDone := pipeSession(t, srv)
	id := first.hello("")
	ch := first.open("")
	second, _ := pipeSession(t, srv)
	ans := second.call(protocol.TypeConnectorHello, "", goodHello(""))
	expectError(t, ans, protocol.CodeConnectorIDMismatch)
	require.True(t, srv.IsOpen(ch))
	require.Equal(t, protocol.TypePong, first.call(protocol.TypePing, "", nil).Type)
	require.NoError(t, first.c.Close())
	<-firstDone
	require.Equal(t, id, second.hello(id), "the same connector_id may connect again once its holder left")
}

// TestLimit_HandlerCallsPerConnection: past MaxHandlerCalls concurrent
// tool calls the read loop waits; the extra call is delayed, not dropped.
// Over a pipe the read loop reads with Read; over a WebSocket it is the
// connection's reader itself (wsConn.serve), which then stops reading.
func TestLimit_HandlerCallsPerConnection(t *testing.T) {
	for _, ws := range []bool{false, true} {
		name := "pipe"
		if ws {
			name = "websocket"
		}
		t.Run(name, func(t *testing.T) { testHandlerCallsBound(t, ws) })
	}
}

func testHandlerCallsBound(t *testing.T, overWS bool) {
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	cfg := func(c *ServerConfig) {
		c.MaxHandlerCalls = 1
		c.Tools = ToolFunc(func(ctx context.Context, _ string, _ protocol.ToolInvoke) (json.RawMessage, error) {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return json.RawMessage(`{"ok":true}`), nil
		})
	}
	var (
		conn Conn
		ch   string
	)
	if overWS {
		_, url := startServer(t, cfg)
		p := dialPeer(t, url, nil)
		p.hello("")
		ch, _ = p.open("")
		conn = p.conn
	} else {
		c := ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }}
		cfg(&c)
		srv, err := NewServer(c)
		require.NoError(t, err)
		defer srv.Close()
		p, _ := pipeSession(t, srv)
		p.hello("")
		ch = p.open("")
		conn = p.c
	}
	ctx := ctxWait(t)
	var reqs []*imv2.Packet
	for range 2 {
		req, err := imv2.NewPacket(protocol.TypeToolInvoke, ch, protocol.ToolInvoke{ToolID: "test_send", Arguments: json.RawMessage(`{"connector_channel_id":"` + ch + `"}`)})
		require.NoError(t, err)
		req.RequestID = "req_" + req.PacketID
		require.NoError(t, conn.Write(ctx, req))
		reqs = append(reqs, req)
	}
	recv(t, started)
	// The read loop waits for a handler slot, so a ping behind the second
	// call is answered only after the first call ended.
	ping, err := imv2.NewPacket(protocol.TypePing, "", nil)
	require.NoError(t, err)
	ping.RequestID = "req_ping"
	require.NoError(t, conn.Write(ctx, ping))
	// A short look for a second call running: it can only miss a broken
	// bound, never fail a working one.
	select {
	case <-started:
		t.Fatal("a second handler call ran past MaxHandlerCalls")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	var order []string
	for range 3 {
		ans, err := conn.Read(ctx)
		require.NoError(t, err)
		require.NotEqual(t, imv2.TypeError, ans.Type, "%+v", ans.Error)
		order = append(order, ans.ReplyTo)
	}
	require.Equal(t, reqs[0].PacketID, order[0], "the first call ends before anything behind it is read")
	require.ElementsMatch(t, []string{reqs[1].PacketID, ping.PacketID}, order[1:], "the delayed call is answered, not dropped")
}

// TestLimit_ClientChannels: a Client holding MaxChannels channels refuses
// another with connector_channel_unavailable and keeps the ones it has.
func TestLimit_ClientChannels(t *testing.T) {
	_, url := startServer(t, nil)
	c, _, _ := dialClient(t, url, func(cfg *ClientConfig) { cfg.Advanced.MaxChannels = 1 })
	a, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	_, err = c.OpenChannel(ctxWait(t), "")
	require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeChannelUnavailable})
	require.NotNil(t, c.engine(a))
}

// TestLimit_FrameSize_MaxTextMessageEndToEnd: a user message of
// imv2.MaxTextBytes text is valid, but with its envelope it is over the
// 1 MiB frame limit. Over a real connection Send reports invalid_packet at
// once, OnFailed is told, nothing stays pending, and the connection keeps
// carrying messages that fit.
func TestLimit_FrameSize_MaxTextMessageEndToEnd(t *testing.T) {
	failed := make(chan imv2.Code, 1)
	srv, url := startServer(t, func(c *ServerConfig) {
		c.Options = &imv2.Options{OnFailed: func(_ string, _ imv2.ChatMessage, e *imv2.Error) { failed <- e.Code }}
	})
	agent := newRecTarget()
	c, _, _ := dialClient(t, url, func(cfg *ClientConfig) { cfg.Target = agent })
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	sc := srv.Channel(ch)
	require.NotNil(t, sc)
	// The server gives its Channel the connection's transport after the
	// open ack, so a Send right after OpenChannel may find none yet and
	// queue the message. The server's reader serves channel.open (ack,
	// then transport) before it reads the next packet, so a pong proves
	// the transport is in place.
	require.NoError(t, c.Ping(ctxWait(t)))
	_, err = sc.Send(ctxWait(t), imv2.ChatMessage{MessageID: "max", Text: strings.Repeat("a", imv2.MaxTextBytes)})
	require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeInvalidPacket})
	require.Contains(t, err.Error(), "frame limit")
	require.Equal(t, imv2.CodeInvalidPacket, recv(t, failed))
	pend, err := sc.Pending(ctxWait(t))
	require.NoError(t, err)
	require.Empty(t, pend)
	fits := strings.Repeat("b", imv2.MaxTextBytes-4096)
	_, err = sc.Send(ctxWait(t), imv2.ChatMessage{MessageID: "fits", Text: fits})
	require.NoError(t, err)
	require.Equal(t, fits, agent.next(t).Text)
}
