package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/testcard"
	"github.com/xagentkit/imv2/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sdkConnector serves a minimal Connector on this SDK whose target
// accepts every final.
func sdkConnector(t *testing.T) string {
	t.Helper()
	return sdkConnectorWith(t, func(context.Context, string, *imv2.ChatMessage) error { return nil })
}

// sdkConnectorWith serves it with target as the platform.
func sdkConnectorWith(t *testing.T, target imv2.TargetFunc) string {
	t.Helper()
	card := testcard.IM("cmdtest", "cmd test")
	srv, err := dataplane.NewServer(dataplane.ServerConfig{
		Card:      card,
		NewTarget: func(string) imv2.Target { return target },
	})
	require.NoError(t, err)
	h, err := connector.NewHandler(connector.HandlerConfig{Card: card, WS: srv})
	require.NoError(t, err)
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return hs.URL
}

// TestConform_K1_K4_TableAndExitStatus: conform prints one row per check
// with its rule IDs and result, skips (without failing) what needs an
// observer, and returns nil when nothing failed.
func TestConform_K1_K4_TableAndExitStatus(t *testing.T) {
	url := sdkConnector(t)
	var out, errOut bytes.Buffer
	err := conform(context.Background(), []string{"-connector", url, "-run", `^K(1|3|4)\.`}, &out, &errOut)
	require.NoError(t, err, "%s\n%s", out.String(), errOut.String())
	table := out.String()
	require.Contains(t, table, "CHECK")
	require.Regexp(t, `K4\.a\s+K4 A1 A2 A3 I4 M1\s+pass`, table)
	require.Regexp(t, `K3\.b\s+.*skip\s+needs an observer`, table)
	require.Regexp(t, `K1\.c\s+.*skip\s+not applicable: the Connector runs without an API key`, table)
	require.NotContains(t, table, "K2.")
	require.Contains(t, table, "0 failed")
}

// TestConform_K1_FailureExitsNonZero: a Connector whose Card does not
// declare the profile fails K1.a; conform prints the reason and returns
// an error (exit status 1), also with -json.
func TestConform_K1_FailureExitsNonZero(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"schema": protocol.CardSchema, "protocol_version": "3.0", "connector_card_id": "im.bad",
			"build": map[string]string{"build_time": "x"}, "connector": map[string]string{"name": "bad", "version": "1"},
			"supports": map[string]any{"target_types": []string{"im"}, "profiles": []string{"xagent.im.v1"}}})
	}))
	defer bad.Close()
	var out, errOut bytes.Buffer
	err := conform(context.Background(), []string{"-connector", bad.URL, "-run", `^K1\.a$`}, &out, &errOut)
	require.ErrorContains(t, err, "1 check(s) failed: K1.a")
	require.Regexp(t, `K1\.a\s+K1 H1 H2 P1 P2 P8\s+FAIL\s+card \(line \d+\): .*xagent.im.v2`, out.String())

	out.Reset()
	err = conform(context.Background(), []string{"-connector", bad.URL, "-run", `^K1\.a$`, "-json"}, &out, &errOut)
	require.Error(t, err)
	var res struct {
		Check, Status, Reason string
		Rules                 []string
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.Equal(t, "K1.a", res.Check)
	require.Equal(t, "FAIL", res.Status)
	require.Contains(t, res.Rules, "P1")
}

// TestConform_A8_VerbosePrintsAckCodesAndResends: with -v the transcript
// shows every ack with its code; a platform that refuses each final's
// first post retryable passes, because the final is resent.
func TestConform_A8_VerbosePrintsAckCodesAndResends(t *testing.T) {
	var mu sync.Mutex
	tried := map[string]bool{}
	url := sdkConnectorWith(t, func(_ context.Context, _ string, m *imv2.ChatMessage) error {
		mu.Lock()
		defer mu.Unlock()
		if !tried[m.MessageID] {
			tried[m.MessageID] = true
			return imv2.NotPosted(errors.New("rate limited"))
		}
		return nil
	})
	var out, errOut bytes.Buffer
	err := conform(context.Background(), []string{"-connector", url, "-run", `^K4\.a$`, "-v"}, &out, &errOut)
	require.NoError(t, err, "%s\n%s", out.String(), errOut.String())
	require.Regexp(t, `K4\.a\s+.*pass`, out.String())
	require.Contains(t, errOut.String(), "status=rejected code=target_delivery_failed retryable=true: resend 1 in 100ms")
	require.Contains(t, errOut.String(), "status=accepted")
}

// TestConform_ListAndUsage: -list prints every check and the rules that
// are not observable; a missing -connector is an error.
func TestConform_ListAndUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, conform(context.Background(), []string{"-list"}, &out, &errOut))
	for _, want := range []string{"K1.a", "K12.c", "K11.x.b", "Not observable", "S7"} {
		require.Contains(t, out.String(), want)
	}
	require.Equal(t, 1, strings.Count(out.String(), "K5.a "))
	err := conform(context.Background(), nil, &out, &errOut)
	require.ErrorContains(t, err, "-connector or -exec is required")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.Error(t, conform(ctx, []string{"-exec", "/nonexistent/connector"}, &out, &errOut))
}
