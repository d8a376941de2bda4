package connector

import (
	"context"

	"github.com/xagentkit/imv2/protocol"
)

// SignIn is a Platform with sign-in flows (the Card's auth_flows): it runs
// auth.start and auth.status, and a flow that succeeds names the
// conversation the channel is bound to. The kit stores the binding, turns
// the Descriptor connected and answers auth.logout itself (Unbind).
type SignIn interface {
	// Start runs auth.start; req.Input holds the flow's fields (a bot
	// token, a chat ID).
	Start(ctx context.Context, channelID string, req protocol.AuthStart) (SignInResult, error)
	// Status answers auth.status for a session Start began.
	Status(ctx context.Context, channelID string, req protocol.AuthStatusRequest) (SignInResult, error)
	// Cancel answers auth.cancel.
	Cancel(ctx context.Context, channelID string, req protocol.AuthCancel) (*protocol.AuthCancelAck, error)
}

// SignInResult is one step of a sign-in flow.
type SignInResult struct {
	// Ack is sent as the auth.start.ack or auth.status.ack; nil with Bind
	// set means authenticated.
	Ack *protocol.AuthAck
	// Bind, when set, binds the channel: its Key is required, ChannelID
	// is filled in. The ack's status becomes authenticated.
	Bind *Binding
}

// authHandler is the Server's AuthHandler for a SignIn platform.
type authHandler struct {
	c  *Connector
	si SignIn
}

func (a authHandler) Start(ctx context.Context, channelID string, req protocol.AuthStart) (*protocol.AuthAck, error) {
	res, err := a.si.Start(ctx, channelID, req)
	if err != nil {
		return nil, err
	}
	return a.settle(ctx, channelID, res)
}

func (a authHandler) Status(ctx context.Context, channelID string, req protocol.AuthStatusRequest) (*protocol.AuthAck, error) {
	res, err := a.si.Status(ctx, channelID, req)
	if err != nil {
		return nil, err
	}
	return a.settle(ctx, channelID, res)
}

func (a authHandler) Cancel(ctx context.Context, channelID string, req protocol.AuthCancel) (*protocol.AuthCancelAck, error) {
	return a.si.Cancel(ctx, channelID, req)
}

// Logout unbinds the channel; the Server adds the Descriptor (created).
func (a authHandler) Logout(ctx context.Context, channelID string) (*protocol.StatusOK, error) {
	if err := a.c.unbind(ctx, channelID); err != nil {
		return nil, err
	}
	return &protocol.StatusOK{Status: "ok"}, nil
}

// settle stores a flow's binding before its ack is sent, so the ack's
// Descriptor already says connected.
func (a authHandler) settle(ctx context.Context, channelID string, res SignInResult) (*protocol.AuthAck, error) {
	ack := res.Ack
	if ack == nil {
		ack = &protocol.AuthAck{}
	}
	if res.Bind != nil {
		b := *res.Bind
		b.ChannelID = channelID
		if err := a.c.bind(ctx, b); err != nil {
			return nil, err
		}
		ack.Status = protocol.AuthAuthenticated
	}
	if ack.Status == "" {
		ack.Status = protocol.AuthPending
	}
	return ack, nil
}
