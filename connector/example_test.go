package connector_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/protocol"
)

func ExampleNewHandler() {
	card := &protocol.Card{
		Schema:          protocol.CardSchema,
		ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{Version: "1.0.0", BuildTime: "2607241200"},
		ConnectorCardID: "im.console",
		Connector:       protocol.CardInfo{Name: "Console", Version: "0.1.0"},
		Supports: protocol.Supports{
			TargetTypes: []string{imv2.TargetTypeIM},
			Targets:     []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: "console", Label: "Console"}},
			Profiles:    []string{imv2.ProfileIMv2},
		},
	}
	// The data plane: one Channel per connector_channel_id, finals posted
	// to the platform by the Target.
	ws, err := dataplane.NewServer(dataplane.ServerConfig{
		Card: card,
		NewTarget: func(string) imv2.Target {
			return imv2.TargetFunc(func(ctx context.Context, ch string, m *imv2.ChatMessage) error { return nil })
		},
	})
	if err != nil {
		panic(err)
	}
	defer ws.Close()
	h, err := connector.NewHandler(connector.HandlerConfig{
		Card:     card,
		Markdown: []byte("---\nname: connector-im-console\n---\n# Console connector\n"),
		APIKey:   "change-me",
		WS:       ws,
	})
	if err != nil {
		panic(err)
	}
	// In production: connector.NewServer(":8080", h).ListenAndServe().
	srv := httptest.NewServer(h)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/health", nil)
	req.Header.Set("Authorization", "Bearer change-me")
	res, err := srv.Client().Do(req)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.StatusCode, string(body))
	// Output:
	// 200 {"status":"ok","connector_card_id":"im.console","connector_card_version":"0.1.0","protocol_version":"3.0","build":{"version":"1.0.0","build_time":"2607241200"}}
}

// A Connector that receives large files keeps them on disk: the same caps
// and expiry as the default MemoryFileStore, the bytes in files in a private
// directory that Close removes.
func ExampleNewDiskFileStore() {
	store, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{MaxTotalBytes: 1 << 30})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	info, err := store.Put(context.Background(), "cch_1", "report.txt", "", strings.NewReader("quarterly figures"))
	if err != nil {
		panic(err)
	}
	// Then: connector.NewHandler(connector.HandlerConfig{Card: card, Files: store, …})
	fmt.Println(info.Filename, info.MimeType, info.ByteSize)
	// Output:
	// report.txt text/plain; charset=utf-8 17
}
