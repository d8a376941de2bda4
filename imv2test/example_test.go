package imv2test_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/imv2test/internal/brokenconnector"
	"github.com/xagentkit/imv2/protocol"
)

// CheckConnector against a Connector at a URL: here the suite's own
// broken fixture, once without flaws and once acking finals with the
// message_id as reply_to.
func ExampleCheckConnector() {
	for _, flaws := range [][]brokenconnector.Flaw{nil, {brokenconnector.AckReplyToMessageID}} {
		b, _ := brokenconnector.New(brokenconnector.Config{Flaws: flaws})
		srv := httptest.NewServer(b.Handler())
		rep, err := imv2test.CheckConnector(context.Background(), imv2test.Connector{URL: srv.URL}, &imv2test.Config{Run: `^K4\.[ac]$`})
		if err != nil {
			panic(err)
		}
		for _, r := range rep.Results {
			fmt.Println(r.Check, r.Status)
		}
		b.Close()
		srv.Close()
	}
	// Output:
	// K4.a pass
	// K4.c pass
	// K4.a FAIL
	// K4.c pass
}

// CheckXAgent against this SDK's xAgent side: the suite plays the
// Connector that dataplane.Client dials.
func ExampleCheckXAgent() {
	start := imv2test.SDKXAgent(dataplane.ClientConfig{})
	rep, err := imv2test.CheckXAgent(context.Background(), start, &imv2test.Config{Run: `^K3\.x$`})
	if err != nil {
		panic(err)
	}
	r, _ := rep.Result("K3.x")
	fmt.Println(r.Check, r.Status, r.Rules)
	// Output:
	// K3.x pass [K3 K4 M9 A6 S6 A1 A2 A3 I4]
}

// RunConnector in a Connector author's test: build the Connector around
// the suite's recording target, return where it listens and how a user
// types on it.
func ExampleRunConnector() {
	// func TestConformance(t *testing.T) { imv2test.RunConnector(t, true, startMyConnector, nil) }
	_ = func(t *testing.T, target *imv2test.RecordingTarget) imv2test.Connector {
		card := myCard() // the Connector's Card
		srv, err := dataplane.NewServer(dataplane.ServerConfig{
			Card:      card,
			NewTarget: func(string) imv2.Target { return target.Target() },
		})
		if err != nil {
			t.Fatal(err)
		}
		h, err := connector.NewHandler(connector.HandlerConfig{Card: card, WS: srv})
		if err != nil {
			t.Fatal(err)
		}
		target.Files = func(ctx context.Context, channelID, ref string) (io.ReadCloser, error) {
			rc, _, err := h.OpenFile(ctx, channelID, ref)
			return rc, err
		}
		t.Cleanup(func() { srv.Close() })
		// Handler: the run serves it in memory; a URL would be dialled.
		return imv2test.Connector{Handler: h, User: imv2test.SDKUser{Server: srv, Files: h}}
	}
}

// RunKit in a Connector author's test: the kit watches its own
// platform calls, so the platform records nothing for the suite. The
// one line of Options makes the idle TTL, its sweep and the activity
// timeout short enough for K6.c and K12.d to watch them expire; without
// it those two checks are skipped, saying so.
func ExampleRunKit() {
	// func TestConformance(t *testing.T) { ... }
	_ = func(t *testing.T) {
		opts := &connector.Options{}
		opts.Advanced.Channel = &imv2.Options{DeltaIdleTTL: time.Second, DeltaSweep: 100 * time.Millisecond, ActivityTimeout: time.Second}
		k, err := connector.New(myCard(), myChat{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		imv2test.RunKit(t, k, nil) // serves k in memory, closes it at the end
	}
}

// myChat is the author's platform.
type myChat struct{}

func (myChat) Post(context.Context, connector.Conversation, *connector.Message) error { return nil }

func myCard() *protocol.Card {
	return &protocol.Card{
		Schema: protocol.CardSchema, ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{BuildTime: time.Now().Format(time.RFC3339)},
		ConnectorCardID: "im.example", Connector: protocol.CardInfo{Name: "Example", Version: "1"},
		Supports: protocol.Supports{TargetTypes: []string{"im"}, Profiles: []string{imv2.ProfileIMv2},
			Targets: []protocol.SupportedTarget{{TargetType: "im", Provider: "example", Label: "Example"}}},
	}
}
