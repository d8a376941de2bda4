package dataplane

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// helloWith is a valid hello but for its protocol_version; omit leaves the
// member out.
func helloWith(version string, omit bool) json.RawMessage {
	v := fmt.Sprintf(`,"protocol_version":%q`, version)
	if omit {
		v = ""
	}
	return json.RawMessage(`{"connector_card_id":"` + testCardID + `"` + v + `,"supported_profiles":["xagent.im.v2"]}`)
}

// TestServer_W4_AdmitsVersionRange: xAgent's hello carries its own current
// version; the Connector admits 3.0 and newer (a patch level compared by
// major and minor: issue 37), refuses a missing,
// unparsable or older one naming both versions, and always answers 3.0.
func TestServer_W4_AdmitsVersionRange(t *testing.T) {
	_, url := startServer(t, nil)
	for _, tc := range []struct {
		hello   string
		omit    bool
		admit   bool
		mention []string
	}{
		{hello: "4.3", admit: true},
		{hello: "3.1", admit: true},
		{hello: "3.0", admit: true},
		{hello: "10.0", admit: true},
		{hello: "2.9", mention: []string{"2.9", "3.0", "below"}},
		{hello: "", mention: []string{"missing", "3.0"}},
		{omit: true, mention: []string{"missing", "3.0"}},
		{hello: "x", mention: []string{`"x"`, "3.0", "major.minor"}},
		{hello: "3", mention: []string{`"3"`, "3.0"}},
		{hello: "4.3.1", admit: true},
		{hello: "2.9.9", mention: []string{"2.9", "3.0", "below"}},
		{hello: "4.3.1.0", mention: []string{`"4.3.1.0"`, "3.0"}},
	} {
		name := tc.hello
		if tc.omit {
			name = "omitted"
		}
		t.Run(name, func(t *testing.T) {
			p := dialPeer(t, url, nil)
			ans := p.call(protocol.TypeConnectorHello, "", helloWith(tc.hello, tc.omit))
			if !tc.admit {
				expectError(t, ans, imv2.CodeInvalidPacket)
				for _, m := range tc.mention {
					require.Contains(t, ans.Error.Message, m)
				}
				// Not admitted, and the connection still takes a hello.
				expectError(t, p.call(protocol.TypeChannelOpen, "", nil), protocol.CodeHelloRequired)
				p.hello("")
				return
			}
			require.Equal(t, protocol.TypeConnectorHelloAck, ans.Type, "hello %q answered %+v", tc.hello, ans.Error)
			var ack protocol.ConnectorHelloAck
			require.NoError(t, ans.DecodePayload(&ack))
			require.Equal(t, "3.0", ack.ProtocolVersion, "W4: the ack carries the Connector's own version, never an echo")
			id, _ := p.open("")
			require.NotEmpty(t, id)
		})
	}
}

// ackConnector is a Connector that answers every hello with a hello.ack
// carrying version (member left out when omit), and records the hello's
// version.
func ackConnector(t *testing.T, version string, omit bool, got chan<- string) string {
	t.Helper()
	hs := httptest.NewServer(withCard(testCard(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up := websocket.Upgrader{Subprotocols: []string{protocol.Subprotocol}}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		c := newWSConn(ws, ConnConfig{})
		defer c.Close()
		ctx := context.Background()
		hello, err := c.Read(ctx)
		if err != nil {
			return
		}
		var h protocol.ConnectorHello
		_ = hello.DecodePayload(&h)
		got <- h.ProtocolVersion
		payload := fmt.Sprintf(`{"connector_card_id":%q,"connector_id":"conn_v","protocol_version":%q}`, testCardID, version)
		if omit {
			payload = fmt.Sprintf(`{"connector_card_id":%q,"connector_id":"conn_v"}`, testCardID)
		}
		ack, _ := imv2.NewResponse(hello, protocol.TypeConnectorHelloAck, json.RawMessage(payload))
		_ = c.Write(ctx, ack)
		// Hold the connection until the client hangs up.
		for {
			if _, err := c.Read(ctx); err != nil {
				return
			}
		}
	})))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestClient_W4_AdmitsAckVersionInRange: the xAgent side admits a Connector
// whose hello.ack version lies in [MinProtocolVersion, MaxProtocolVersion]
// (default 3.0–3.0), says which version the Connector speaks otherwise,
// always writes 3.0 in its hello, and exposes the negotiated version.
func TestClient_W4_AdmitsAckVersionInRange(t *testing.T) {
	wide := func(c *ClientConfig) {
		c.Advanced.MinProtocolVersion = protocol.Version{Major: 3, Minor: 0}
		c.Advanced.MaxProtocolVersion = protocol.Version{Major: 4, Minor: 3}
	}
	for _, tc := range []struct {
		ack     string
		omit    bool
		mod     func(*ClientConfig)
		admit   bool
		mention string
	}{
		{ack: "3.0", admit: true},
		{ack: "3.1", mention: "speaks protocol_version 3.1"},
		{ack: "4.3", mention: "speaks protocol_version 4.3"},
		{ack: "2.9", mention: "speaks protocol_version 2.9"},
		{ack: "", mention: "no protocol_version"},
		{omit: true, mention: "no protocol_version"},
		{ack: "x", mention: `"x" is not major.minor`},
		{ack: "4.3", mod: wide, admit: true},
		{ack: "3.1", mod: wide, admit: true},
		{ack: "4.4", mod: wide, mention: "admits 3.0 to 4.3"},
		{ack: "2.9", mod: wide, mention: "speaks protocol_version 2.9"},
	} {
		name := tc.ack
		if tc.omit {
			name = "omitted"
		}
		if tc.mod != nil {
			name += "_range_3.0-4.3"
		}
		t.Run(name, func(t *testing.T) {
			got := make(chan string, 1)
			url := ackConnector(t, tc.ack, tc.omit, got)
			cfg := ClientConfig{URL: url, Target: newRecTarget(), Advanced: ClientAdvanced{CardID: testCardID}}
			if tc.mod != nil {
				tc.mod(&cfg)
			}
			c, err := Dial(ctxWait(t), cfg)
			require.Equal(t, "3.0", recv(t, got), "W4: the hello always carries this side's own version")
			if !tc.admit {
				require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeInvalidPacket})
				require.ErrorContains(t, err, tc.mention)
				return
			}
			require.NoError(t, err)
			defer func() { require.NoError(t, c.Close()) }()
			want, _ := protocol.ParseVersion(tc.ack)
			require.Equal(t, want, c.ProtocolVersion())
		})
	}
}

func TestClient_W4_VersionRangeConfig(t *testing.T) {
	_, err := Dial(ctxWait(t), ClientConfig{URL: "http://127.0.0.1:1", Target: newRecTarget(),
		Advanced: ClientAdvanced{CardID: testCardID, MinProtocolVersion: protocol.Version{Major: 4}, MaxProtocolVersion: protocol.Version{Major: 3}},
	})
	require.ErrorContains(t, err, "below MinProtocolVersion")
}

// TestServer_W12_LogoutAckDescribesStateAfterSignOut: auth.logout.ack's
// Descriptor is the state after sign-out (Common Protocol §8.14): a Describe that
// still says connected is sent as created; revoked stays revoked.
func TestServer_W12_LogoutAckDescribesStateAfterSignOut(t *testing.T) {
	for _, tc := range []struct{ described, want string }{
		{protocol.StatusConnected, protocol.StatusCreated},
		{protocol.StatusAuthenticating, protocol.StatusCreated},
		{protocol.StatusRevoked, protocol.StatusRevoked},
		{protocol.StatusExpired, protocol.StatusExpired},
	} {
		t.Run(tc.described, func(t *testing.T) {
			_, url := startServer(t, func(c *ServerConfig) {
				c.Auth = &recAuth{}
				c.Describe = func(context.Context, string) ChannelInfo { return ChannelInfo{Status: tc.described} }
			})
			p := dialPeer(t, url, nil)
			p.hello("")
			id, d := p.open("")
			require.Equal(t, tc.described, d.Connection.Status)
			ans := p.call(protocol.TypeAuthLogout, id, nil)
			require.Equal(t, protocol.TypeAuthLogoutAck, ans.Type, "%+v", ans.Error)
			var lo protocol.StatusOK
			require.NoError(t, ans.DecodePayload(&lo))
			require.Equal(t, "ok", lo.Status)
			require.Equal(t, tc.want, lo.ConnectionDescriptor.Connection.Status)
		})
	}
}
