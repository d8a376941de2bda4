package dataplane

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// legacyDescriptors rewrites every Descriptor the Connector sends into a
// legacy xagent.connection/v1 one: schema v1, the singular
// connection.profile instead of profiles.
type legacyDescriptors struct{ Conn }

func (l legacyDescriptors) Read(ctx context.Context) (*imv2.Packet, error) {
	p, err := l.Conn.Read(ctx)
	if err == nil && (p.Type == protocol.TypeChannelOpenAck || p.Type == protocol.TypeDescriptorPush) {
		s := string(p.Payload)
		s = strings.Replace(s, `"schema":"xagent.connection/v2"`, `"schema":"xagent.connection/v1"`, 1)
		s = strings.Replace(s, `"profiles":["xagent.im.v2"]`, `"profile":"xagent.im.v2"`, 1)
		p.Payload = []byte(s)
	}
	return p, err
}

// TestClient_H5_LegacyDescriptorIsNormalized: a channel.open.ack and a
// descriptor push carrying an xagent.connection/v1 Descriptor open and
// keep the channel with the profile it names (Common Protocol §12: xAgent
// normalizes it). Before, the v1 Descriptor's profiles were empty and
// the open failed "no profile this client supports … is enabled".
func TestClient_H5_LegacyDescriptorIsNormalized(t *testing.T) {
	srv, url := startServer(t, nil)
	descs := make(chan *protocol.Descriptor, 4)
	c, _, _ := dialClient(t, url, func(cfg *ClientConfig) {
		cfg.Advanced.WrapConn = func(conn Conn) Conn { return legacyDescriptors{conn} }
		cfg.OnDescriptor = func(_ string, d *protocol.Descriptor) { descs <- d }
	})
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	d := recv(t, descs)
	require.Equal(t, protocol.DescriptorSchema, d.Schema)
	require.Equal(t, []string{imv2.ProfileIMv2}, d.Connection.Profiles)
	require.Equal(t, []string{imv2.ProfileIMv2}, c.Negotiated(ch).Profiles())

	require.NoError(t, srv.Push(ctxWait(t), ch))
	d = recv(t, descs)
	require.Equal(t, []string{imv2.ProfileIMv2}, d.Connection.Profiles)
	require.Equal(t, []string{imv2.ProfileIMv2}, c.Negotiated(ch).Profiles(), "the push did not renegotiate to nothing")
}

// TestClient_H1_CardGuidanceIsNotARefusal: Dial admits a Card whose
// related_skill_ids do not name connector-<card id> and whose
// supports.targets[] names a target type outside target_types: Common Protocol §4.1 calls
// the first guidance and forbids neither. Dial refused both before.
func TestClient_H1_CardGuidanceIsNotARefusal(t *testing.T) {
	srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }})
	require.NoError(t, err)
	card := testCard()
	card.Tools[0].RelatedSkillIDs = []string{"im-connector-reply"}
	card.Supports.Targets = append(card.Supports.Targets, protocol.SupportedTarget{TargetType: "email", Provider: "mail", Label: "Mail"})
	require.Error(t, card.Validate(), "the author's check still names both")
	hs := httptest.NewServer(withCard(card, srv))
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	c, err := Dial(ctxWait(t), ClientConfig{URL: hs.URL, Target: newRecTarget()})
	require.NoError(t, err)
	require.NoError(t, c.Close())

	card.Connector.Name = ""
	hs2 := httptest.NewServer(withCard(card, srv))
	t.Cleanup(hs2.Close)
	_, err = Dial(ctxWait(t), ClientConfig{URL: hs2.URL, Target: newRecTarget()})
	require.ErrorContains(t, err, "connector.name is empty", "Common Protocol §4.1's hard validation still refuses")
}

// emptyPushProfiles rewrites every descriptor push to enable no profile.
type emptyPushProfiles struct{ Conn }

func (e emptyPushProfiles) Read(ctx context.Context) (*imv2.Packet, error) {
	p, err := e.Conn.Read(ctx)
	if err == nil && p.Type == protocol.TypeDescriptorPush {
		p.Payload = []byte(strings.Replace(string(p.Payload), `"profiles":["xagent.im.v2"]`, `"profiles":[]`, 1))
	}
	return p, err
}

// TestClient_W7_PushEnablingNoProfileIsIgnored: a descriptor push with
// empty profiles breaks Common Protocol §9's hard validation; it is
// ignored, where it used to renegotiate the channel to nothing (every
// final and delta refused unsupported_packet from then on).
func TestClient_W7_PushEnablingNoProfileIsIgnored(t *testing.T) {
	srv, url := startServer(t, nil)
	descs := make(chan *protocol.Descriptor, 4)
	c, _, _ := dialClient(t, url, func(cfg *ClientConfig) {
		cfg.Advanced.WrapConn = func(conn Conn) Conn { return emptyPushProfiles{conn} }
		cfg.OnDescriptor = func(_ string, d *protocol.Descriptor) { descs <- d }
	})
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	recv(t, descs)
	require.NoError(t, srv.Push(ctxWait(t), ch))
	require.NoError(t, c.Ping(ctxWait(t))) // the push was read before the pong
	select {
	case d := <-descs:
		t.Fatalf("an invalid push was applied: %+v", d.Connection)
	default:
	}
	require.Equal(t, []string{imv2.ProfileIMv2}, c.Negotiated(ch).Profiles())
	_, err = c.Send(ctxWait(t), ch, imv2.ChatMessage{Text: "still allowed"})
	require.NoError(t, err)
}
