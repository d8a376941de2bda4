package connector_test

import (
	"io"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/imv2test"
)

// TestKit_K1_K12_A8_RateLimitedPlatformPassesEveryMode runs the whole
// Connector suite against a Connector on the kit whose platform answers
// every 5th call with a rate limit (Retry-After 200 ms), in stream, edit and
// buffer modes at once: the kit waits and calls again, so every check
// passes; the skips are the ones the mode makes inapplicable. The suite
// observes the kit's own event stream (Advanced.Events), as `imv2sim
// conform -exec` reads it from a binary's stdout: the platform records
// nothing for it.
func TestKit_K1_K12_A8_RateLimitedPlatformPassesEveryMode(t *testing.T) {
	t.Parallel()
	modes := []struct {
		name   string
		mode   connector.Mode
		apiKey string
		skips  []string
	}{
		{"stream", connector.ModeStream, "", []string{"K1.c", "K5.a"}},
		{"edit", connector.ModeEdit, testKey, []string{"K5.a"}},
		{"buffer", connector.ModeBuffer, "", []string{"K1.c", "K2.d"}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			p := newPretend(5)
			var rep *imv2test.Report
			// In a synctest bubble, served in memory: the suite's waits and
			// the kit's timers run on the bubble's clock.
			synctest.Test(t, func(t *testing.T) {
				events, stream := io.Pipe()
				opts := connector.Options{Mode: m.mode, APIKey: m.apiKey, DefaultConversation: func(id string) string { return id },
					Advanced: connector.Advanced{Events: stream,
						Channel: &imv2.Options{DeltaIdleTTL: kitDeltaTTL, DeltaSweep: kitSweep, ActivityTimeout: kitActivityTTL}}}
				k, err := connector.New(kitCard(m.apiKey), p, &opts)
				require.NoError(t, err)
				obs := imv2test.NewStreamObserver(events)
				defer func() {
					k.Close()
					stream.Close()
					<-obs.Done()
				}()
				require.Equal(t, m.mode, k.Mode())
				rep, err = imv2test.CheckConnector(t.Context(), imv2test.Connector{
					Handler: k, APIKey: m.apiKey, Observer: obs, User: kitUser{k}, Buffered: m.mode == connector.ModeBuffer,
					DeltaIdleTTL: kitDeltaTTL, DeltaSweep: kitSweep, ActivityTimeout: kitActivityTTL,
				}, &imv2test.Config{DeltaStreams: 300})
				require.NoError(t, err)
			})
			imv2test.ReportTo(t, rep)
			require.Empty(t, rep.Failed())
			require.Equal(t, m.skips, rep.Skipped())
			p.mu.Lock()
			defer p.mu.Unlock()
			require.Positive(t, p.limited, "the platform rate-limited calls")
		})
	}
}
