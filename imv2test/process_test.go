package imv2test_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/imv2test"
)

// TestStartProcess_ListeningLinePlainAndJSON: StartProcess finds the
// console's URL in both forms it prints it, the plain line and, with
// -log-format json, the slog record (msg "listening on URL", attribute
// url), the "monitoring on" record after it notwithstanding; the URL
// found serves the Card.
func TestStartProcess_ListeningLinePlainAndJSON(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p, err := imv2test.StartProcess(ctx, consoleBinary, "-addr", "127.0.0.1:0", "-json",
				"-log-format", format, "-log-level", "info", "-metrics-addr", "127.0.0.1:0")
			require.NoError(t, err)
			defer p.Close()
			require.True(t, strings.HasPrefix(p.URL(), "http://127.0.0.1:"), "URL %q", p.URL())
			require.NotContains(t, p.URL(), " ")
			resp, err := http.Get(p.URL() + "/connector-card.json")
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
		})
	}
}
