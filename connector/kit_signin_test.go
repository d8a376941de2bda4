package connector_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// formPlatform signs in by a form that finishes within auth.start; it has
// neither Status nor Cancel.
type formPlatform struct{ *pretend }

func (formPlatform) Start(_ context.Context, _ string, req protocol.AuthStart) (connector.SignInResult, error) {
	if req.Input["chat_id"] == "" {
		return connector.SignInResult{}, &connector.SignInError{Reason: "chat_id is required"}
	}
	return connector.SignInResult{Bind: &state.Binding{Key: req.Input["chat_id"]}}, nil
}

// TestKit_W12_FormFlowWithoutStatusOrCancelOnTheWire: auth.start with a
// refusal is status failed with the reason; then authenticated with a
// connected Descriptor and an auth_session_id; auth.status is answered
// authenticated and auth.cancel ignored with the connected Descriptor
// (Common Protocol §8.9–§8.12), by the kit, for a platform with Start only.
func TestKit_W12_FormFlowWithoutStatusOrCancelOnTheWire(t *testing.T) {
	card := kitCard("")
	card.AuthFlows = []protocol.AuthFlow{{ID: "bot", Type: "form", TargetType: imv2.TargetTypeIM, Title: "Bot",
		Fields: []protocol.AuthField{{Name: "chat_id", Label: "Chat", InputType: "text", Required: true}}}}
	k, err := connector.New(card, formPlatform{newPretend(0)}, nil)
	require.NoError(t, err)
	hs := httptest.NewServer(k)
	t.Cleanup(func() { hs.Close(); k.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: hs.URL, Target: inbound(make(chan imv2.ChatMessage, 1))})
	require.NoError(t, err)
	defer cli.Close()
	ch, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	request := func(typ string, payload any) (*imv2.Packet, error) {
		p, err := imv2.NewPacket(typ, ch, payload)
		require.NoError(t, err)
		return cli.Request(ctx, p)
	}
	ask := func(typ string, payload, out any) {
		t.Helper()
		ans, err := request(typ, payload)
		require.NoError(t, err)
		require.NoError(t, ans.DecodePayload(out))
	}
	var start protocol.AuthAck
	ask(protocol.TypeAuthStart, protocol.AuthStart{FlowID: "bot"}, &start)
	require.Equal(t, protocol.AuthFailed, start.Status)
	require.Equal(t, "chat_id is required", start.Message)

	_, err = request(protocol.TypeAuthStatus, protocol.AuthStatusRequest{AuthSessionID: start.AuthSessionID})
	require.ErrorIs(t, err, &imv2.Error{Code: protocol.CodeAuthSessionNotFound}, "no session outlives auth.start")

	ask(protocol.TypeAuthStart, protocol.AuthStart{FlowID: "bot", Input: map[string]string{"chat_id": "-100"}}, &start)
	require.Equal(t, protocol.AuthAuthenticated, start.Status)
	require.NotEmpty(t, start.AuthSessionID)
	require.Equal(t, protocol.StatusConnected, start.ConnectionDescriptor.Connection.Status)

	var status protocol.AuthAck
	ask(protocol.TypeAuthStatus, protocol.AuthStatusRequest{AuthSessionID: start.AuthSessionID}, &status)
	require.Equal(t, protocol.AuthAuthenticated, status.Status)
	require.Equal(t, protocol.StatusConnected, status.ConnectionDescriptor.Connection.Status)

	var cancelAck protocol.AuthCancelAck
	ask(protocol.TypeAuthCancel, protocol.AuthCancel{AuthSessionID: start.AuthSessionID}, &cancelAck)
	require.Equal(t, "ignored", cancelAck.Status)
	require.Equal(t, protocol.AuthAuthenticated, cancelAck.AuthStatus)
	require.NotNil(t, cancelAck.ConnectionDescriptor)
	require.Equal(t, protocol.StatusConnected, cancelAck.ConnectionDescriptor.Connection.Status)
	require.Equal(t, start.AuthSessionID, cancelAck.AuthSessionID)
}
