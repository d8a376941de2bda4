package dataplane

import (
	"context"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// TestHandler_E3_ErrorTextNeverStopsTheAnswer: a tool handler's error
// whose text is not UTF-8 (a platform's GBK body) or whose code is empty
// is still answered, with the fallback code and the text made valid. The
// answer used to fail to encode, logged at Debug only, and xAgent's
// request waited for its timeout.
func TestHandler_E3_ErrorTextNeverStopsTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *imv2.Error
		code imv2.Code
	}{
		{"GBK text", &imv2.Error{Code: protocol.CodeToolInvokeFailed, Message: "platform: \xb4\xed\xce\xf3"}, protocol.CodeToolInvokeFailed},
		{"empty code", &imv2.Error{Message: "no code"}, protocol.CodeToolInvokeFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := startServer(t, func(c *ServerConfig) {
				c.Tools = ToolFunc(func(context.Context, string, protocol.ToolInvoke) (json.RawMessage, error) { return nil, tc.err })
			})
			c, _, _ := dialClient(t, url, nil)
			ch, err := c.OpenChannel(ctxWait(t), "")
			require.NoError(t, err)
			req, err := imv2.NewPacket(protocol.TypeToolInvoke, ch, protocol.ToolInvoke{ToolID: "test_send"})
			require.NoError(t, err)
			_, err = c.Request(ctxWait(t), req) // an answer with an error is the error
			var e *imv2.Error
			require.ErrorAs(t, err, &e, "tool.invoke answered")
			require.Equal(t, tc.code, e.Code)
			require.True(t, utf8.ValidString(e.Message))
		})
	}
}

// TestHandler_E3_PlatformTextInAuthAndDescriptorEncodes: a sign-in's
// failure reason, a cancel's message and a channel's display name taken
// from a platform in GBK still go out, made valid: the auth.start.ack says
// failed with the reason, the cancel is answered, and channel.open is
// answered with its Descriptor. Both used to
// fail to encode: the open and the sign-in were answered invalid_packet.
func TestHandler_E3_PlatformTextInAuthAndDescriptorEncodes(t *testing.T) {
	_, url := startServer(t, func(c *ServerConfig) {
		c.Auth = gbkAuth{&recAuth{}}
		c.Describe = func(context.Context, string) ChannelInfo {
			return ChannelInfo{Status: protocol.StatusConnected, DisplayName: "\xb4\xed room", AccountHint: "\xce\xf3"}
		}
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	id, _ := p.open("")
	ans := p.call(protocol.TypeAuthStart, id, protocol.AuthStart{FlowID: "test_qr"})
	require.Equal(t, protocol.TypeAuthStartAck, ans.Type, "error: %+v", ans.Error)
	var aa protocol.AuthAck
	require.NoError(t, ans.DecodePayload(&aa))
	require.Equal(t, protocol.AuthFailed, aa.Status)
	require.Equal(t, "\uFFFD wrong code", aa.Message)
	ans = p.call(protocol.TypeDescriptorGet, id, nil)
	require.Equal(t, protocol.TypeDescriptorGetAck, ans.Type, "error: %+v", ans.Error)
	ans = p.call(protocol.TypeAuthCancel, id, protocol.AuthCancel{AuthSessionID: "auth_1"})
	require.Equal(t, protocol.TypeAuthCancelAck, ans.Type, "error: %+v", ans.Error)
}

// gbkAuth fails every sign-in, and answers every cancel, with text in GBK.
type gbkAuth struct{ *recAuth }

func (gbkAuth) Cancel(context.Context, string, protocol.AuthCancel) (*protocol.AuthCancelAck, error) {
	return &protocol.AuthCancelAck{Status: "ignored", Message: "\xb4\xed"}, nil
}

func (gbkAuth) Start(context.Context, string, protocol.AuthStart) (*protocol.AuthAck, error) {
	return &protocol.AuthAck{Status: protocol.AuthFailed, Message: "\xb4\xed wrong code"}, nil
}
