package imv2test_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/protocol"
)

// xagentFlaw breaks this SDK's xAgent on the wire, by rewriting what its
// dataplane.Client writes or reads, to prove the xAgent-side checks can
// fail.
type xagentFlaw string

const (
	xNoPong          xagentFlaw = "no-pong"          // K1.x: ping is never answered (W8)
	xSeqFromZero     xagentFlaw = "seq-from-zero"    // K2.x, K7.x, K9.x: deltas numbered from 0 (D2)
	xNoDedup         xagentFlaw = "no-dedup"         // K3.x: a resent user message is acked accepted again (A6)
	xNoResend        xagentFlaw = "no-resend"        // K4.x, K11.x.a, K11.x.b: a final is sent once and never again (S2)
	xLeakSessionID   xagentFlaw = "leak-session-id"  // K7.x: finals carry session_id (I2)
	xDeltaFiles      xagentFlaw = "delta-files"      // K7.x, K9.x: deltas carry files (D7)
	xAnswerForbidden xagentFlaw = "answer-forbidden" // K10.x.a: a Connector's delta gets an error back (P6)
	xAnswerSync      xagentFlaw = "answer-sync"      // K10.x.b: session sync / history packets get an error back (P6)
	xTrustDescriptor xagentFlaw = "trust-descriptor" // K1.y: the Card's supports.profiles is not consulted: a Descriptor's xagent.im.v2 is enabled (P2)
)

// flawConn applies flaws to one connection; seen is shared by all the
// connections of one xAgent, so no-resend spans reconnects.
type flawConn struct {
	dataplane.Conn
	flaws []xagentFlaw
	mu    *sync.Mutex
	seen  map[string]bool
}

func (f *flawConn) has(x xagentFlaw) bool { return slices.Contains(f.flaws, x) }

func (f *flawConn) Write(ctx context.Context, p *imv2.Packet) error {
	var payload map[string]any
	_ = json.Unmarshal(p.Payload, &payload)
	changed := false
	switch p.Type {
	case protocol.TypePong:
		if f.has(xNoPong) {
			return nil
		}
	case imv2.TypeChatMessageDelta:
		if f.has(xSeqFromZero) {
			payload["sequence"], changed = payload["sequence"].(float64)-1, true
		}
		if f.has(xDeltaFiles) {
			payload["files"], changed = []any{}, true
		}
	case imv2.TypeChatMessage:
		id, _ := payload["message_id"].(string)
		f.mu.Lock()
		again := f.seen[id]
		f.seen[id] = true
		f.mu.Unlock()
		if again && f.has(xNoResend) {
			return nil
		}
		if f.has(xLeakSessionID) {
			payload["session_id"], changed = "sess_1", true
		}
	case imv2.TypeChatMessageAck:
		if f.has(xNoDedup) && payload["status"] == string(imv2.AckDuplicate) {
			payload["status"], changed = string(imv2.AckAccepted), true
		}
	}
	if changed {
		q := *p
		q.Payload, _ = json.Marshal(payload)
		p = &q
	}
	return f.Conn.Write(ctx, p)
}

func (f *flawConn) Read(ctx context.Context) (*imv2.Packet, error) {
	p, err := f.Conn.Read(ctx)
	if err == nil && p.Type == imv2.TypeChatMessageDelta && f.has(xAnswerForbidden) {
		_ = f.Conn.Write(ctx, imv2.NewErrorPacket(p, &imv2.Error{Code: imv2.CodeUnsupportedPacket, Message: "deltas go the other way"}))
	}
	if err == nil && (strings.HasPrefix(p.Type, "session.") || strings.HasPrefix(p.Type, "history.")) && f.has(xAnswerSync) {
		_ = f.Conn.Write(ctx, imv2.NewErrorPacket(p, &imv2.Error{Code: imv2.CodeUnsupportedPacket, Message: "not served"}))
	}
	return p, err
}

// sdkXAgent starts this SDK's xAgent with short timers (an ack timeout
// of 1 s, so resends come within the suite's Resend of 3 s) and flaws;
// each check gets a fresh xAgent, so no-resend's memory is per check.
func sdkXAgent(flaws ...xagentFlaw) imv2test.StartXAgent {
	return func(ctx context.Context, env imv2test.XAgentEnv) (imv2test.XAgent, error) {
		cfg := dataplane.ClientConfig{
			Options:  &imv2.Options{AckTimeout: time.Second, RetryMin: 100 * time.Millisecond, RetryMax: 200 * time.Millisecond},
			Advanced: dataplane.ClientAdvanced{ReconnectMin: 50 * time.Millisecond, ReconnectMax: 100 * time.Millisecond},
		}
		if slices.Contains(flaws, xTrustDescriptor) {
			// The Client reads the Card as declaring xagent.im.v2 whatever
			// it says: an xAgent that takes the Descriptor's word.
			cfg.Advanced.HTTPClient = &http.Client{Transport: cardWithIMv2{env.HTTPClient.Transport}}
		}
		if len(flaws) > 0 {
			var mu sync.Mutex
			seen := map[string]bool{}
			cfg.Advanced.WrapConn = func(c dataplane.Conn) dataplane.Conn {
				return &flawConn{Conn: c, flaws: flaws, mu: &mu, seen: seen}
			}
		}
		return imv2test.SDKXAgent(cfg)(ctx, env)
	}
}

// cardWithIMv2 fetches with its RoundTripper and adds xagent.im.v2 to a
// Card's supports.profiles.
type cardWithIMv2 struct{ http.RoundTripper }

func (c cardWithIMv2) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.RoundTripper.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/connector-card.json") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var card protocol.Card
	if err := json.Unmarshal(body, &card); err != nil {
		return nil, err
	}
	if !slices.Contains(card.Supports.Profiles, imv2.ProfileIMv2) {
		card.Supports.Profiles = append(card.Supports.Profiles, imv2.ProfileIMv2)
	}
	if body, err = json.Marshal(&card); err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

var xagentRuns = []struct {
	name  string
	flaws []xagentFlaw
	fail  []string
}{
	{name: "sdk-xagent"},
	{name: "group-a", flaws: []xagentFlaw{xNoPong, xNoDedup, xLeakSessionID, xAnswerForbidden, xNoResend},
		fail: []string{"K1.x", "K3.x", "K4.x", "K7.x", "K10.x.a", "K11.x.a", "K11.x.b"}},
	{name: "seq-from-zero", flaws: []xagentFlaw{xSeqFromZero}, fail: []string{"K2.x", "K7.x", "K9.x"}},
	{name: "delta-files", flaws: []xagentFlaw{xDeltaFiles, xAnswerSync}, fail: []string{"K7.x", "K9.x", "K10.x.b"}},
	{name: "trust-descriptor", flaws: []xagentFlaw{xTrustDescriptor}, fail: []string{"K1.y"}},
}

// TestXAgent_K1_K12_SDKClient runs the xAgent-side checks — the suite
// plays a Connector — against this SDK's dataplane.Client, and against
// it with flaws injected on the wire, all at once: the plain Client passes
// every check, each flawed one fails exactly the expected checks. The
// runs share one synctest bubble, on an in-memory network: every wait is
// on its fake clock.
func TestXAgent_K1_K12_SDKClient(t *testing.T) {
	t.Parallel()
	reps := make([]*imv2test.Report, len(xagentRuns))
	errs := make([]error, len(xagentRuns))
	synctest.Test(t, func(t *testing.T) {
		var fs []func()
		for i, r := range xagentRuns {
			fs = append(fs, func() {
				reps[i], errs[i] = imv2test.CheckXAgent(t.Context(), sdkXAgent(r.flaws...), &imv2test.Config{Resend: 3 * time.Second, InMemory: true})
			})
		}
		concurrently(fs...)
	})
	failed := map[string]bool{}
	for i, r := range xagentRuns {
		t.Run(r.name, func(t *testing.T) {
			require.NoError(t, errs[i])
			t.Logf("xAgent side, %s %v:\n%s", r.name, r.flaws, table(t, reps[i]))
			want := slices.Clone(r.fail)
			slices.SortFunc(want, compareCheckNames)
			require.Equal(t, orEmpty(want), orEmpty(reps[i].Failed()))
			require.Empty(t, reps[i].Skipped())
		})
		for _, c := range reps[i].Failed() {
			failed[c] = true
		}
	}
	checks, err := imv2test.Checks(imv2test.SideXAgent)
	require.NoError(t, err)
	for _, c := range checks {
		require.True(t, failed[c.Name], "no flaw fails %s", c.Name)
	}
}
