package pgstore_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/internal/toolreplaytest"
	"github.com/xagentkit/imv2/pgstore"
	"github.com/xagentkit/imv2/protocol"
)

// serveToolChild is the child of TestToolReplay_W13_RunsOnceAcrossASIGKILL
// (toolreplaytest.ChildMain, from TestMain): a Server on pgstore at the
// database URL db.
func serveToolChild(db string, tool toolreplaytest.Tool) (http.Handler, error) {
	st, err := pgstore.Open(context.Background(), db, pgstore.Options{})
	if err != nil {
		return nil, err
	}
	srv, err := dataplane.NewServer(dataplane.ServerConfig{
		Card: consolebridge.Card(),
		NewTarget: func(string) imv2.Target {
			return imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil })
		},
		Options:  &imv2.Options{Pending: st.Pending(), Completed: st.Completed()},
		Registry: st,
		Tools:    dataplane.ToolFunc(tool),
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /connector-card.json", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(consolebridge.Card())
	})
	mux.Handle("/ws", srv)
	return mux, nil
}

// TestToolReplay_W13_RunsOnceAcrossASIGKILL (issue 37): a Connector
// process on pgstore answers tool calls, is killed with SIGKILL; a new
// process on the same database gets the replays from the reconnected
// xAgent (a dataplane.Client) and runs none of them
// (toolreplaytest.Run says how each replay is answered).
func TestToolReplay_W13_RunsOnceAcrossASIGKILL(t *testing.T) {
	quiet := imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil })
	toolreplaytest.Run(t, srv.NewDatabase(t), func(t *testing.T, url, channel string) (string, toolreplaytest.Call) {
		var known []string
		if channel != "" {
			known = append(known, channel)
		}
		x := xagent(t, url, quiet, known...)
		ch, err := x.OpenChannel(context.Background(), channel)
		if err != nil {
			t.Fatal(err)
		}
		return ch, func(requestID, text string) (json.RawMessage, error) {
			args, _ := json.Marshal(map[string]string{"connector_channel_id": ch, "text": text})
			p, err := imv2.NewPacket(protocol.TypeToolInvoke, ch, protocol.ToolInvoke{ToolID: consolebridge.ToolSend, Arguments: args})
			if err != nil {
				return nil, err
			}
			p.RequestID = requestID
			ack, err := x.Request(context.Background(), p)
			if err != nil {
				return nil, err
			}
			return ack.Payload, nil
		}
	})
}
