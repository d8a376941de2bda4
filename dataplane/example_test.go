package dataplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/protocol"
)

// A whole Connector data plane: a Card, a Target that posts assistant
// finals on the IM platform, and NewServer mounted at /ws. In production
// the handler goes in connector.HandlerConfig.WS and the process runs
// http.ListenAndServe (or connector.NewServer); here httptest stands in,
// and an in-process xAgent (Dial) talks to it.
func Example() {
	card := &protocol.Card{
		Schema:          protocol.CardSchema,
		ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{Version: "0.1.0", BuildTime: "2611300000"},
		ConnectorCardID: "im.console",
		Connector:       protocol.CardInfo{Name: "Console", Version: "0.1.0"},
		Supports: protocol.Supports{
			TargetTypes: []string{imv2.TargetTypeIM},
			Targets:     []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: "console", Label: "Console"}},
			Profiles:    []string{imv2.ProfileIMv2},
		},
	}
	shown := make(chan struct{})
	platform := imv2.TargetFunc(func(_ context.Context, _ string, m *imv2.ChatMessage) error {
		fmt.Println("console shows:", m.Text)
		close(shown)
		return nil
	})
	srv, err := dataplane.NewServer(dataplane.ServerConfig{
		Card:      card,
		NewTarget: func(channelID string) imv2.Target { return platform },
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /ws", srv)
	mux.HandleFunc("GET /connector-card.json", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(card) // connector.Handler serves it, and health, files …
	})
	hs := httptest.NewServer(mux) // production: http.ListenAndServe(":8080", mux)
	defer hs.Close()
	defer srv.Close()

	// xAgent's side: an agent that receives user messages.
	ctx := context.Background()
	heard := make(chan string, 1)
	agent := imv2.TargetFunc(func(_ context.Context, _ string, m *imv2.ChatMessage) error {
		heard <- m.Text
		return nil
	})
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: hs.URL, Target: agent})
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	ch, err := cli.OpenChannel(ctx, "")
	if err != nil {
		panic(err)
	}

	// A user writes on the console: the Connector sends it to xAgent …
	if _, err := srv.Channel(ch).Send(ctx, imv2.ChatMessage{Text: "hello"}); err != nil {
		panic(err)
	}
	fmt.Println("agent hears:", <-heard)
	// … and the agent answers with a final.
	if _, err := cli.Send(ctx, ch, imv2.ChatMessage{Text: "hi there"}); err != nil {
		panic(err)
	}
	<-shown
	// Output:
	// agent hears: hello
	// console shows: hi there
}
