package imv2test_test

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/internal/testcard"
	"github.com/xagentkit/imv2/protocol"
)

// sdkTimeouts are the short bounds the in-process SDK Connector declares,
// so K6.c and K12.d can observe them.
const (
	sdkDeltaTTL    = 3 * time.Second
	sdkSweep       = 50 * time.Millisecond
	sdkActivityTTL = time.Second
)

// startSDKConnector is the smallest Connector on this SDK: the data
// plane Server and the HTTP kit around the suite's recording target.
func startSDKConnector(apiKey string) func(t *testing.T, target *imv2test.RecordingTarget) imv2test.Connector {
	return func(t *testing.T, target *imv2test.RecordingTarget) imv2test.Connector {
		schema, err := protocol.ToolInputSchema(map[string]json.RawMessage{"text": json.RawMessage(`{"type":"string"}`)}, "text")
		require.NoError(t, err)
		card := testcard.IM("sdktest", "SDK test")
		card.Tools = []protocol.Tool{{ToolID: "sdktest_send", Profile: imv2.ProfileIMv2, InputSchema: schema}}
		srv, err := dataplane.NewServer(dataplane.ServerConfig{
			Card:      card,
			NewTarget: func(string) imv2.Target { return target.Target() },
			Options:   &imv2.Options{DeltaIdleTTL: sdkDeltaTTL, DeltaSweep: sdkSweep, ActivityTimeout: sdkActivityTTL},
		})
		require.NoError(t, err)
		h, err := connector.NewHandler(connector.HandlerConfig{Card: card, APIKey: apiKey, WS: srv})
		require.NoError(t, err)
		target.Files = func(ctx context.Context, channelID, ref string) (io.ReadCloser, error) {
			rc, _, err := h.OpenFile(ctx, channelID, ref)
			return rc, err
		}
		t.Cleanup(func() { srv.Close() })
		return imv2test.Connector{
			Handler: h, APIKey: apiKey, User: imv2test.SDKUser{Server: srv, Files: h},
			DeltaIdleTTL: sdkDeltaTTL, DeltaSweep: sdkSweep, ActivityTimeout: sdkActivityTTL,
		}
	}
}

// sdkConfig probes just above the SDK's default cap of 256 open streams.
var sdkConfig = imv2test.Config{DeltaStreams: 300}

// TestRunConnector_K1_K12_SDKConnector runs the suite in process, with
// the recording target as observer, against a Connector made of
// dataplane.Server and connector.Handler, with a target that streams;
// and, at the same time, with one that cannot (and an API key). Both runs
// share one synctest bubble: every wait is on its fake clock.
func TestRunConnector_K1_K12_SDKConnector(t *testing.T) {
	t.Parallel()
	var streaming, buffered *imv2test.Report
	var streamErr, bufErr error
	synctest.Test(t, func(t *testing.T) {
		run := func(streams bool, key string, rep **imv2test.Report, err *error) func() {
			target := imv2test.NewRecordingTarget(streams)
			c := startSDKConnector(key)(t, target)
			c.Observer, c.Buffered = target, !streams
			return func() { *rep, *err = imv2test.CheckConnector(t.Context(), c, &sdkConfig) }
		}
		concurrently(run(true, "", &streaming, &streamErr), run(false, "sdk-key", &buffered, &bufErr))
	})
	t.Run("streaming", func(t *testing.T) {
		require.NoError(t, streamErr)
		imv2test.ReportTo(t, streaming)
		require.Empty(t, streaming.Failed())
		require.Equal(t, []string{"K1.c", "K5.a"}, streaming.Skipped())
	})
	t.Run("buffered", func(t *testing.T) {
		require.NoError(t, bufErr)
		imv2test.ReportTo(t, buffered)
		require.Empty(t, buffered.Failed())
		require.Equal(t, []string{"K2.d"}, buffered.Skipped())
	})
}

// TestRunConnector_K3_HandsItsTargetToStart: RunConnector builds the
// Connector with its recording target, observes through it and reports
// each check as a subtest; K3.b needs the observer, so its pass shows the
// target was wired in.
func TestRunConnector_K3_HandsItsTargetToStart(t *testing.T) {
	t.Parallel()
	rep := imv2test.RunConnector(t, true, startSDKConnector(""), &imv2test.Config{Run: `^K3\.b$`})
	require.Len(t, rep.Results, 1)
	require.Equal(t, imv2test.Pass, rep.Results[0].Status, rep.Results[0].Reason)
}
