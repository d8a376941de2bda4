package dataplane

import (
	"context"
	"errors"
	"slices"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/defaults"
	"github.com/xagentkit/imv2/internal/wiretext"
	"github.com/xagentkit/imv2/protocol"
)

// auth routes auth.start, auth.status, auth.cancel and auth.logout of an
// open channel to the AuthHandler (W12). The payload is decoded on the
// read loop (a bad one gets invalid_packet at once); the handler runs in
// its own goroutine.
func (ss *session) auth(p *imv2.Packet) {
	h := ss.srv.cfg.Auth
	if h == nil {
		ss.fail(p, imv2.CodeUnsupportedPacket, "%s is not served: this Connector has no auth handler", p.Type)
		return
	}
	e := ss.openEntry(p)
	if e == nil {
		return
	}
	id := e.id
	switch p.Type {
	case protocol.TypeAuthStart:
		var req protocol.AuthStart
		if err := p.DecodePayload(&req); err != nil {
			ss.failErr(p, err)
			return
		}
		if req.FlowID == "" || !ss.srv.cardFlow[req.FlowID] {
			ss.fail(p, imv2.CodeInvalidPacket, "auth.start: flow_id %q is not an auth flow of the Card", short(req.FlowID))
			return
		}
		ss.spawn(func(ctx context.Context) {
			ack, err := h.Start(ctx, id, req)
			ss.authAck(ctx, p, protocol.TypeAuthStartAck, e, ack, req.FlowID, "", err)
		})
	case protocol.TypeAuthStatus:
		var req protocol.AuthStatusRequest
		if err := p.DecodePayload(&req); err != nil {
			ss.failErr(p, err)
			return
		}
		ss.spawn(func(ctx context.Context) {
			ack, err := h.Status(ctx, id, req)
			ss.authAck(ctx, p, protocol.TypeAuthStatusAck, e, ack, req.FlowID, req.AuthSessionID, err)
		})
	case protocol.TypeAuthCancel:
		var req protocol.AuthCancel
		if err := p.DecodePayload(&req); err != nil {
			ss.failErr(p, err)
			return
		}
		ss.spawn(func(ctx context.Context) {
			ack, err := h.Cancel(ctx, id, req)
			if err == nil && ack == nil {
				err = errors.New("auth handler returned no ack")
			}
			if err != nil {
				ss.ackError(p, protocol.TypeAuthCancelAck, err, imv2.CodeChannelUnavailable)
				return
			}
			out := *ack
			out.Message = wiretext.Valid(out.Message)
			out.ConnectionDescriptor = validDescriptor(out.ConnectionDescriptor)
			out.ConnectorChannelID = defaults.Or(out.ConnectorChannelID, id)
			out.AuthSessionID = defaults.Or(out.AuthSessionID, req.AuthSessionID)
			ss.reply(p, protocol.TypeAuthCancelAck, &out)
		})
	case protocol.TypeAuthLogout:
		ss.spawn(func(ctx context.Context) {
			ack, err := h.Logout(ctx, id)
			if err != nil {
				ss.ackError(p, protocol.TypeAuthLogoutAck, err, imv2.CodeChannelUnavailable)
				return
			}
			var out protocol.StatusOK
			if ack != nil {
				out = *ack
			}
			out.Status = defaults.Or(out.Status, "ok")
			if out.ConnectionDescriptor == nil {
				// The ack shows the state after logout (Common Protocol §8.14).
				out.ConnectionDescriptor = ss.srv.describe(ctx, e)
			}
			out.ConnectionDescriptor = ss.signedOut(out.ConnectionDescriptor)
			ss.reply(p, protocol.TypeAuthLogoutAck, &out)
		})
	}
}

// authAck sends auth.start.ack or auth.status.ack, filling the identity
// fields the handler left empty and, once authenticated, the Descriptor.
func (ss *session) authAck(ctx context.Context, p *imv2.Packet, typ string, e *channelEntry, ack *protocol.AuthAck, flowID, sessionID string, err error) {
	if err == nil && ack == nil {
		err = errors.New("auth handler returned no ack")
	}
	if err != nil {
		ss.ackError(p, typ, err, imv2.CodeChannelUnavailable)
		return
	}
	out := *ack
	out.Message = wiretext.Valid(out.Message) // a platform's text (SignInError.Reason): it must encode
	out.ConnectionDescriptor = validDescriptor(out.ConnectionDescriptor)
	out.ConnectorChannelID = defaults.Or(out.ConnectorChannelID, e.id)
	out.FlowID = defaults.Or(out.FlowID, flowID)
	out.AuthSessionID = defaults.Or(out.AuthSessionID, sessionID)
	if out.Status == protocol.AuthAuthenticated && out.ConnectionDescriptor == nil {
		out.ConnectionDescriptor = ss.srv.describe(ctx, e)
	}
	ss.reply(p, typ, &out)
}

// tool routes tool.invoke of an open channel to the ToolHandler (W12). A
// tool the Card does not declare, or a handler error, is answered in
// tool.invoke.ack's envelope error (E3), tool_invoke_failed by default. A
// replay of a call already answered or still running gets that call's
// answer and runs nothing (W13, toolreplay.go).
func (ss *session) tool(p *imv2.Packet) {
	h := ss.srv.cfg.Tools
	if h == nil {
		ss.fail(p, imv2.CodeUnsupportedPacket, "tool.invoke is not served: this Connector has no tool handler")
		return
	}
	e := ss.openEntry(p)
	if e == nil {
		return
	}
	var req protocol.ToolInvoke
	if err := p.DecodePayload(&req); err != nil {
		ss.failErr(p, err)
		return
	}
	if req.ToolID == "" {
		ss.fail(p, imv2.CodeInvalidPacket, "tool.invoke: tool_id is missing")
		return
	}
	if !ss.srv.cardTool[req.ToolID] {
		ss.ackError(p, protocol.TypeToolInvokeAck, imv2.Errorf(protocol.CodeToolInvokeFailed, "tool %q is not declared in the Card", short(req.ToolID)), protocol.CodeToolInvokeFailed)
		return
	}
	id, peer := e.id, e.inst.id
	sum := callSum(req.ToolID, req.Arguments)
	ss.spawn(func(ctx context.Context) {
		c, first := ss.srv.tools.begin(peer, id, p.RequestID, sum)
		if !first {
			select {
			case <-c.done:
			case <-ctx.Done():
				return
			}
			ss.log.Debug("dataplane: tool.invoke replayed; sent the first call's answer", "connector_channel_id", id, "tool_id", short(req.ToolID))
			ss.toolAck(p, c.ans)
			return
		}
		ans := toolAnswer{toolID: req.ToolID}
		if c != nil { // a keyed call: its durable record first (toolreplay.go)
			ran, err := ss.srv.toolRan(ctx, peer, id, p.RequestID, sum)
			if err != nil {
				ss.log.Warn("dataplane: tool.invoke not run: its replay record could not be written", "connector_channel_id", id, "tool_id", short(req.ToolID), "err", err)
				ans.err = ss.ackErrorBody(p, storeUnavailable("tool.invoke", err), protocol.CodeToolInvokeFailed)
				ss.srv.tools.abandon(c, ans)
				ss.toolAck(p, ans)
				return
			}
			if ran {
				ss.log.Info("dataplane: tool.invoke replayed after its answer was lost (a restart); not run again", "connector_channel_id", id, "tool_id", short(req.ToolID))
				if ans.result, err = ss.srv.toolRanBefore(ctx, peer, id, p.RequestID, short(req.ToolID)); err != nil {
					ans.err = ss.ackErrorBody(p, err, protocol.CodeToolInvokeFailed)
				}
				ss.srv.tools.finish(c, ans)
				ss.toolAck(p, ans)
				return
			}
		}
		result, err := h.Invoke(ctx, id, req)
		if err != nil {
			ans.err = ss.ackErrorBody(p, err, protocol.CodeToolInvokeFailed)
		} else {
			ans.result = slices.Clone(result) // kept for replays: not the handler's buffer
		}
		ss.srv.tools.finish(c, ans)
		if c != nil {
			if err := ss.srv.toolDone(ctx, peer, id, p.RequestID, ans); err != nil {
				ss.log.Warn("dataplane: how a tool.invoke ended was not recorded; a replay after a restart will say it is unknown", "connector_channel_id", id, "tool_id", short(req.ToolID), "err", err)
			}
		}
		ss.toolAck(p, ans)
	})
}

// toolAck sends ans as the tool.invoke.ack answering req.
func (ss *session) toolAck(req *imv2.Packet, ans toolAnswer) {
	if ans.err != nil {
		ss.sendAckError(req, protocol.TypeToolInvokeAck, ans.err)
		return
	}
	ss.reply(req, protocol.TypeToolInvokeAck, protocol.ToolInvokeAck{ToolID: ans.toolID, Result: ans.result})
}

// ackError sends the ack of a failed business operation with the failure in
// its envelope error (E3). An *imv2.Error keeps its code and message; any
// other error may carry platform detail, so it is logged and replaced by
// a generic message under the fallback code.
func (ss *session) ackError(req *imv2.Packet, typ string, err error, fallback imv2.Code) {
	ss.sendAckError(req, typ, ss.ackErrorBody(req, err, fallback))
}

// ackErrorBody returns the envelope error ackError sends for err.
func (ss *session) ackErrorBody(req *imv2.Packet, err error, fallback imv2.Code) *imv2.PacketError {
	var e *imv2.Error
	if !errors.As(err, &e) {
		ss.log.Warn("dataplane: handler failed", "type", req.Type, "connector_channel_id", req.ConnectorChannelID, "err", err)
		e = imv2.Errorf(fallback, "%s failed", req.Type)
	}
	// A handler's code and text may be anything; the answer must encode.
	body := imv2.NewErrorPacket(nil, e).Error // code and text made sendable
	if body.Code != e.Code {
		body.Code = fallback // no stable code: the operation's own
	}
	return body
}

// sendAckError sends the ack of type typ answering req with body in its
// envelope error.
func (ss *session) sendAckError(req *imv2.Packet, typ string, body *imv2.PacketError) {
	p, perr := imv2.NewResponse(req, typ, nil)
	if perr != nil {
		ss.failErr(req, perr)
		return
	}
	b := *body // each ack its own copy
	p.Error = &b
	ss.send(p)
}

// validDescriptor returns d with its free text (display name, account
// hint, tool reasons) made valid UTF-8; d itself is left as it is.
func validDescriptor(d *protocol.Descriptor) *protocol.Descriptor {
	if d == nil {
		return nil
	}
	out := *d
	out.Target.DisplayName = wiretext.Valid(out.Target.DisplayName)
	out.Target.AccountHint = wiretext.Valid(out.Target.AccountHint)
	if len(out.Tools) > 0 {
		out.Tools = slices.Clone(out.Tools)
		for i := range out.Tools {
			out.Tools[i].Reason = wiretext.Valid(out.Tools[i].Reason)
		}
	}
	return &out
}

// signedOut makes a logout ack's Descriptor describe the state after
// sign-out (Common Protocol §8.14: "created, expired or revoked"): a status that
// still claims a sign-in (connected, authenticating, degraded) — a stale
// Describe, say — becomes created in a copy, and the author is told in
// the log.
func (ss *session) signedOut(d *protocol.Descriptor) *protocol.Descriptor {
	switch d.Connection.Status {
	case protocol.StatusConnected, protocol.StatusAuthenticating, protocol.StatusDegraded:
		ss.log.Warn("dataplane: the Descriptor after auth.logout still says signed in; sent as created", "status", d.Connection.Status)
		c := *d
		c.Connection.Status = protocol.StatusCreated
		return &c
	}
	return d
}
