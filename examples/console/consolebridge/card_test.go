package consolebridge

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/connector"
)

// TestCard_H1_AsServedBefore: the Card built from the embedded card.json
// is valid and encodes to exactly the bytes the console served before the
// Card became a data file (testdata/card.wire.json, taken from
// GET /connector-card.json), so a member misspelt in card.json — which
// the tolerant decoder would drop — fails here. The Skill names the Card
// (H3), or connector.New refuses it.
func TestCard_H1_AsServedBefore(t *testing.T) {
	c := Card()
	require.Equal(t, CardID, c.ConnectorCardID)
	require.Equal(t, ToolSend, c.Tools[0].ToolID)
	got, err := json.Marshal(c)
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/card.wire.json")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	k, err := connector.New(c, &printer{}, &connector.Options{Skill: skill})
	require.NoError(t, err)
	require.NoError(t, k.Close())
}
