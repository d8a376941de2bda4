package connector

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// SignIn is a Platform with sign-in flows (the Card's auth_flows): it runs
// auth.start, and a flow that succeeds names the conversation the channel
// is bound to. The kit stores the binding, turns the Descriptor connected
// and answers auth.logout itself (Unbind).
//
// A flow that finishes within auth.start (a form: a bot token and a chat
// ID) needs nothing more: the kit answers auth.status and auth.cancel from
// the binding. A flow that stays pending (a QR code scanned later)
// implements SignInStatus, and SignInCanceler when it can be stopped.
type SignIn interface {
	// Start runs auth.start; req.Input holds the flow's fields (a bot
	// token, a chat ID).
	Start(ctx context.Context, channelID string, req protocol.AuthStart) (SignInResult, error)
}

// SignInStatus is a SignIn whose sessions outlive auth.start: it answers
// auth.status for a session Start began. Without it the kit answers from
// the channel's binding: authenticated when connected, expired when
// expired, unauthenticated when revoked, and auth_session_not_found
// without a binding, since no session outlives Start
// (Common Protocol §8.9).
type SignInStatus interface {
	Status(ctx context.Context, channelID string, req protocol.AuthStatusRequest) (SignInResult, error)
}

// SignInCanceler is a SignIn whose unfinished sessions can be stopped: it
// answers auth.cancel. Without it the kit answers "ignored" with the
// channel's Descriptor when it is bound (a finished sign-in is kept), and
// "not_found" when not (Common Protocol §8.11, §8.12).
type SignInCanceler interface {
	Cancel(ctx context.Context, channelID string, req protocol.AuthCancel) (*protocol.AuthCancelAck, error)
}

// SignInError is a sign-in refused for a reason the user can fix (a wrong
// password, a chat the bot cannot see). Start returns it, and the kit
// answers auth.start with status failed and Reason as the message; any
// other error of Start is sent as the ack's envelope error, an
// *imv2.Error with its code, anything else generic (its text may carry
// tokens). Reason must hold no secret.
type SignInError struct {
	// Reason is shown to the user as the ack's message; no secret.
	Reason string
}

// Error returns "sign-in failed: " and Reason.
func (e *SignInError) Error() string { return "sign-in failed: " + e.Reason }

// SignInResult is one step of a sign-in flow.
type SignInResult struct {
	// Ack is sent as the auth.start.ack or auth.status.ack; nil with Bind
	// set means authenticated.
	Ack *protocol.AuthAck
	// Bind, when set, binds the channel: its Key is required, ChannelID
	// is filled in. The ack's status becomes authenticated.
	Bind *state.Binding
}

// authHandler is the Server's AuthHandler for a SignIn platform.
type authHandler struct {
	c  *Connector
	si SignIn
}

// Start runs the flow; an ack without an auth_session_id gets a new one.
func (a authHandler) Start(ctx context.Context, channelID string, req protocol.AuthStart) (*protocol.AuthAck, error) {
	res, err := a.si.Start(ctx, channelID, req)
	var se *SignInError
	if errors.As(err, &se) {
		res, err = SignInResult{Ack: &protocol.AuthAck{Status: protocol.AuthFailed, Message: se.Reason}}, nil
	}
	if err != nil {
		return nil, err
	}
	ack, err := a.settle(ctx, channelID, res)
	if err == nil && ack.AuthSessionID == "" {
		ack.AuthSessionID = "auth_" + uuid.NewString()
	}
	return ack, err
}

func (a authHandler) Status(ctx context.Context, channelID string, req protocol.AuthStatusRequest) (*protocol.AuthAck, error) {
	if ss, ok := a.si.(SignInStatus); ok {
		res, err := ss.Status(ctx, channelID, req)
		if err != nil {
			return nil, err
		}
		return a.settle(ctx, channelID, res)
	}
	st, bound, err := a.authState(ctx, channelID)
	if err != nil {
		return nil, err
	}
	if !bound {
		return nil, imv2.Errorf(protocol.CodeAuthSessionNotFound, "no sign-in is under way on this channel")
	}
	return &protocol.AuthAck{Status: st}, nil
}

func (a authHandler) Cancel(ctx context.Context, channelID string, req protocol.AuthCancel) (*protocol.AuthCancelAck, error) {
	if sc, ok := a.si.(SignInCanceler); ok {
		return sc.Cancel(ctx, channelID, req)
	}
	st, bound, err := a.authState(ctx, channelID)
	if err != nil {
		return nil, err
	}
	if !bound {
		return &protocol.AuthCancelAck{Status: "not_found", AuthStatus: protocol.AuthUnauthenticated}, nil
	}
	d, err := a.c.server.Descriptor(ctx, channelID)
	if err != nil {
		return nil, err
	}
	return &protocol.AuthCancelAck{Status: "ignored", AuthStatus: st, Message: "already signed in", ConnectionDescriptor: d}, nil
}

// authState is the auth status the channel's binding stands for.
func (a authHandler) authState(ctx context.Context, channelID string) (protocol.AuthState, bool, error) {
	b, ok, err := a.c.store.Binding(ctx, channelID)
	if err != nil || !ok {
		return "", false, err
	}
	switch b.State {
	case state.BindingConnected:
		return protocol.AuthAuthenticated, true, nil
	case state.BindingExpired:
		return protocol.AuthExpired, true, nil
	}
	return protocol.AuthUnauthenticated, true, nil
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
			a.c.unbound(context.WithoutCancel(ctx), b) // never stored: the platform drops its credentials
			return nil, err
		}
		ack.Status = protocol.AuthAuthenticated
	}
	if ack.Status == "" {
		ack.Status = protocol.AuthPending
	}
	return ack, nil
}
