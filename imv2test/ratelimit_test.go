package imv2test_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/display"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/internal/testcard"
)

// rateLimited is a pretend IM platform behind display.Target, with every
// capability (stream, edit, typing with status and tool name), that
// records what it shows as observer Events and refuses every 5th post of
// a final as rate-limited, retryable — the way Telegram or Slack answer
// 429 with a Retry-After.
type rateLimited struct {
	rec     *imv2test.Recorder
	posts   atomic.Int64 // final posts tried (Send, Finish)
	limited atomic.Int64 // of them refused
}

var errRateLimited = errors.New("platform: rate limited, retry after 200ms")

func (p *rateLimited) limit() error {
	if p.posts.Add(1)%5 == 0 {
		p.limited.Add(1)
		return imv2.Retryable(errRateLimited)
	}
	return nil
}

func (p *rateLimited) final(m *imv2.ChatMessage) error {
	if err := p.limit(); err != nil {
		return err
	}
	e := imv2test.Event{Event: "final", MessageID: m.MessageID, Text: &m.Text}
	for _, f := range m.Files {
		e.Files = append(e.Files, imv2test.EventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
	}
	p.rec.Record(e)
	return nil
}

func (p *rateLimited) Send(_ context.Context, _ string, m *imv2.ChatMessage) error {
	return p.final(m)
}

func (p *rateLimited) Finish(_ context.Context, _, _ string, m *imv2.ChatMessage) error {
	return p.final(m)
}

func (p *rateLimited) Draft(_ context.Context, _ string, d display.Draft) (string, error) {
	p.rec.Record(imv2test.Event{Event: "draft", MessageID: d.MessageID, Text: &d.Text})
	return "draft-" + d.MessageID, nil
}

func (p *rateLimited) Post(_ context.Context, _, messageID, text string) (string, error) {
	p.rec.Record(imv2test.Event{Event: "post", MessageID: messageID, Text: &text})
	return "post-" + messageID, nil
}

func (p *rateLimited) Edit(_ context.Context, _, handle, text string) error {
	p.rec.Record(imv2test.Event{Event: "edit", MessageID: strings.TrimPrefix(handle, "post-"), Text: &text})
	return nil
}

func (p *rateLimited) Typing(_ context.Context, _ string, a imv2.ChatActivity) error {
	if a.Status == imv2.ActivityIdle {
		p.rec.Record(imv2test.Event{Event: "typing_clear"})
		return nil
	}
	p.rec.Record(imv2test.Event{Event: "typing", Status: string(a.Status), ToolName: a.ToolName})
	return nil
}

// The capability sets of the three display modes.
type (
	rlStream struct {
		display.Drafter
		display.Typer
	}
	rlEdit struct {
		display.Editor
		display.Typer
	}
	rlBuffer struct {
		display.Platform
		display.Typer
	}
)

// checkedTarget resolves every file_ref of a final against the channel's
// uploads before the platform sees it (M7): an unknown one is refused for
// good, since resending the same ref cannot succeed.
type checkedTarget struct {
	*display.Target
	files *connector.Handler
}

func (c checkedTarget) PostMessage(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	for _, f := range m.Files {
		rc, _, err := c.files.OpenFile(ctx, channelID, f.FileRef)
		switch {
		case errors.Is(err, connector.ErrFileNotFound), errors.Is(err, connector.ErrWrongChannel):
			return imv2.Permanent(fmt.Errorf("file_ref %q was not uploaded to this channel (M7)", f.FileRef))
		case err != nil:
			return imv2.Retryable(err)
		}
		rc.Close()
	}
	return c.Target.PostMessage(ctx, channelID, m)
}

// startRateLimited starts a Connector on the SDK (dataplane.Server,
// connector.Handler, display.Target) whose platform rate-limits every 5th
// final post, in the given display mode.
func startRateLimited(t *testing.T, mode display.Mode, apiKey string) (imv2test.Connector, *rateLimited) {
	p := &rateLimited{rec: &imv2test.Recorder{}}
	var platform display.Platform
	switch mode {
	case display.Stream:
		platform = rlStream{p, p}
	case display.Edit:
		platform = rlEdit{p, p}
	default:
		platform = rlBuffer{p, p}
	}
	tg, err := display.New(platform, &display.Options{Mode: mode, Interval: 20 * time.Millisecond, ActivityTimeout: sdkActivityTTL})
	require.NoError(t, err)
	require.Equal(t, mode, tg.Mode())
	card := testcard.IM("ratelimited", "Rate-limited")
	var files *connector.Handler
	srv, err := dataplane.NewServer(dataplane.ServerConfig{
		Card:      card,
		NewTarget: func(string) imv2.Target { return checkedTarget{tg, files} },
		Options:   &imv2.Options{DeltaIdleTTL: sdkDeltaTTL, DeltaSweep: sdkSweep, ActivityTimeout: sdkActivityTTL},
	})
	require.NoError(t, err)
	files, err = connector.NewHandler(connector.Config{Card: card, APIKey: apiKey, WS: srv})
	require.NoError(t, err)
	hs := httptest.NewServer(files)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		tg.Close()
	})
	return imv2test.Connector{
		URL: hs.URL, APIKey: apiKey, Observer: p.rec, User: imv2test.SDKUser{Server: srv, Files: files},
		Buffered:     mode == display.Buffer,
		DeltaIdleTTL: sdkDeltaTTL, DeltaSweep: sdkSweep, ActivityTimeout: sdkActivityTTL,
	}, p
}

// rlRun is one run of the suite against the rate-limited Connector.
type rlRun struct {
	name  string
	mode  display.Mode
	key   string
	cfg   imv2test.Config
	skips []string
}

// TestRateLimited_A7_A8_K1_K12_PassesWithResends: a correct Connector
// whose platform refuses every 5th post retryable passes every check in
// the three display modes, because the suite resends a final after a
// retryable rejection as xAgent does (A7, A8). The same Connector with
// the resends cut off (a budget below the first backoff) fails, so the
// pass is the resends' doing; the platform refused posts in every run.
func TestRateLimited_A7_A8_K1_K12_PassesWithResends(t *testing.T) {
	t.Parallel()
	// A long Wait: four suites at once on a loaded machine, and K6 floods.
	cfg := sdkConfig
	cfg.Wait = 10 * time.Second
	noResend := cfg
	noResend.RetryBudget = time.Nanosecond
	runs := []rlRun{
		{"stream", display.Stream, "rl-key", cfg, []string{"K5.a"}},
		{"edit", display.Edit, "", cfg, []string{"K1.c", "K5.a"}},
		{"buffer", display.Buffer, "", cfg, []string{"K1.c", "K2.d"}},
		{"stream-no-resend", display.Stream, "", noResend, nil},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reps := make([]*imv2test.Report, len(runs))
	errs := make([]error, len(runs))
	plats := make([]*rateLimited, len(runs))
	logs := make([]*strings.Builder, len(runs))
	var fs []func()
	for i, r := range runs {
		c, p := startRateLimited(t, r.mode, r.key)
		plats[i] = p
		logs[i] = &strings.Builder{}
		rc := r.cfg
		rc.Log = &syncBuilder{b: logs[i]}
		fs = append(fs, func() { reps[i], errs[i] = imv2test.CheckConnector(ctx, c, &rc) })
	}
	concurrently(fs...)
	for i, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			require.NoError(t, errs[i])
			t.Logf("rate-limited Connector, mode %s:\n%s", r.name, table(t, reps[i]))
			require.NotZero(t, plats[i].limited.Load(), "the platform never refused a post")
			t.Logf("the platform refused %d of %d final posts; %d resends", plats[i].limited.Load(), plats[i].posts.Load(),
				strings.Count(logs[i].String(), "retryable=true: resend "))
			if r.skips == nil {
				require.NotEmpty(t, reps[i].Failed(), "without resends a rate-limited Connector must fail")
				require.Contains(t, logs[i].String(), "retryable=true: gave up after 0 resend(s)")
				return
			}
			require.Empty(t, reps[i].Failed())
			require.Equal(t, r.skips, reps[i].Skipped())
			// -v shows the ack codes and the resends (the transcript).
			require.Contains(t, logs[i].String(), "status=rejected code=target_delivery_failed retryable=true: resend 1 in 100ms")
		})
	}
}

// syncBuilder is a strings.Builder safe for the suite's log writes.
type syncBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
