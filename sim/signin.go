package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/protocol"
)

// DefaultPollInterval is the wait between auth.status polls of a sign-in
// whose ack names no poll_interval_millis.
const DefaultPollInterval = 2 * time.Second

// SignIn runs a Common Protocol 3.0 sign-in on the simulator's channel, as
// xAgent's front end does: auth.start with the flow and input, then, while
// the session is pending or scanned, auth.status every
// poll_interval_millis (qr_refresh_required asks for a new code with
// refresh). A QR code or message the Connector sends is logged for the
// person signing in. flowID "" is the Card's only auth flow for im.
//
// It returns the last ack: authenticated with a nil error, any other end
// (failed, expired, unauthenticated) with an error that carries the ack's
// message.
func (s *Simulator) SignIn(ctx context.Context, flowID string, input map[string]string) (*protocol.AuthAck, error) {
	if flowID == "" {
		var err error
		if flowID, err = s.onlyFlow(); err != nil {
			return nil, err
		}
	}
	var clk clock.Clock = clock.System{}
	if s.cfg.Options != nil && s.cfg.Options.Clock != nil {
		clk = s.cfg.Options.Clock
	}
	ack, err := s.auth(ctx, protocol.TypeAuthStart, protocol.AuthStart{FlowID: flowID, Input: input})
	for err == nil {
		s.logf("auth %s: %s %s%s", flowID, ack.Status, ack.Message, qr(ack))
		req := protocol.AuthStatusRequest{FlowID: flowID, AuthSessionID: ack.AuthSessionID}
		switch ack.Status {
		case protocol.AuthAuthenticated:
			return ack, nil
		case protocol.AuthPending, protocol.AuthScanned:
		case protocol.AuthQRRefreshRequired:
			req.Refresh = true
		default:
			return ack, fmt.Errorf("sim: sign-in %s ended %s: %s", flowID, ack.Status, ack.Message)
		}
		wait := DefaultPollInterval
		if ack.PollIntervalMillis > 0 {
			wait = time.Duration(ack.PollIntervalMillis) * time.Millisecond
		}
		if err := sleep(ctx, clk, wait); err != nil {
			return ack, err
		}
		ack, err = s.auth(ctx, protocol.TypeAuthStatus, req)
	}
	return ack, err
}

// onlyFlow is the ID of the Card's one auth flow for target type im.
func (s *Simulator) onlyFlow() (string, error) {
	var ids []string
	for _, f := range s.client.Card().AuthFlows {
		if f.TargetType == imv2.TargetTypeIM {
			ids = append(ids, f.ID)
		}
	}
	if len(ids) != 1 {
		return "", fmt.Errorf("sim: the Card has %d auth flows for im %v; name the one to run", len(ids), ids)
	}
	return ids[0], nil
}

// auth sends one auth request on the simulator's channel and decodes its ack.
func (s *Simulator) auth(ctx context.Context, typ string, payload any) (*protocol.AuthAck, error) {
	p, err := imv2.NewPacket(typ, s.channelID(), payload)
	if err != nil {
		return nil, err
	}
	ans, err := s.client.Request(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("sim: %s: %w", typ, err)
	}
	var ack protocol.AuthAck
	if err := ans.DecodePayload(&ack); err != nil {
		return nil, fmt.Errorf("sim: %s.ack: %w", typ, err)
	}
	return &ack, nil
}

// qr is the QR code of an ack, for the log line.
func qr(a *protocol.AuthAck) string {
	if a.QRCodeText != "" {
		return " qr_code_text=" + a.QRCodeText
	}
	return ""
}

// sleep waits d on clk, or until ctx ends.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	fired := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
