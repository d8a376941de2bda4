package matrixbridge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/xagentkit/imv2/examples/matrix/matrixbridge"
	"github.com/xagentkit/imv2/protocol"
)

// A Bridge is the whole Connector: serve its Handler at the base URL that
// xAgent's catalog names. xAgent then reads the Card, dials /ws, opens a
// channel and binds a room with the form flow.
func ExampleNew() {
	b, err := matrixbridge.New(matrixbridge.Config{
		Build:  protocol.Build{Version: "0.1.0", BuildTime: "2611300000"},
		APIKey: "change-me",
		// StateDir: "/var/lib/matrix-connector", // bindings and delivery state
	})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	srv := httptest.NewServer(b.Handler()) // production: connector.NewServer(addr, b.Handler())
	defer srv.Close()

	res, err := http.Get(srv.URL + "/connector-card.json")
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	var card protocol.Card
	if err := json.NewDecoder(res.Body).Decode(&card); err != nil {
		panic(err)
	}
	fmt.Println(card.ConnectorCardID, card.Supports.Profiles)
	for _, f := range card.AuthFlows[0].Fields {
		fmt.Println(f.Name, f.Required, f.Secret)
	}
	// Output:
	// im.matrix [xagent.im.v2]
	// homeserver true false
	// user_id true false
	// access_token false true
	// password false true
	// room true false
}

// The message_id of a user message depends only on its room and event (the
// kit derives it: connector.EventMessageID), so
// a replayed /sync never creates a second business message.
func ExampleMessageID() {
	a := matrixbridge.MessageID("!room:example.org", "$event1")
	b := matrixbridge.MessageID("!room:example.org", "$event1")
	fmt.Println(a == b, len(a))
	// Output: true 40
}
