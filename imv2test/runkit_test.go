package imv2test_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/internal/testcard"
)

// editChat is a pretend chat a newcomer writes: post, edit, typing, and a
// rate limit on every 5th post. It records nothing for the suite: RunKit
// watches the kit's calls.
type editChat struct{ posts atomic.Int64 }

func (c *editChat) Post(context.Context, connector.Conversation, *connector.Message) error {
	if c.posts.Add(1)%5 == 0 {
		return imv2.RetryAfter(errors.New("429 Too Many Requests"), 100*time.Millisecond)
	}
	return nil
}

func (c *editChat) PostDraft(_ context.Context, _ connector.Conversation, messageID, _ string) (string, error) {
	return "h-" + messageID, nil
}

func (c *editChat) Edit(context.Context, connector.Conversation, string, string) error { return nil }

func (c *editChat) Finish(ctx context.Context, to connector.Conversation, _ string, m *connector.Message) error {
	return c.Post(ctx, to, m)
}

func (c *editChat) Typing(context.Context, connector.Conversation, imv2.ChatActivity) error {
	return nil
}

// TestRunKit_K1_K12_KitConnectorInProcess: a connector.New Connector in
// edit mode, rate-limited every 5th post, whose platform records nothing,
// passes the suite in process: every check that needs an observer ran,
// and the API key and short bounds were read from the kit, so the only
// skip is K5.a, which its mode makes inapplicable. The checks run on a
// synctest bubble's clock (CheckKit); RunKit, the same run on the wall
// clock with subtests, runs two of them (the console binary's runs are
// the suite's wall-clock runs, one per mode).
func TestRunKit_K1_K12_KitConnectorInProcess(t *testing.T) {
	t.Parallel()
	build := func() (*connector.Connector, error) {
		return connector.New(testcard.IM("editchat", "Edit chat"), &editChat{}, &connector.Options{
			APIKey:   "runkit-test-key-0123456789abcdef",
			Advanced: connector.Advanced{Channel: &imv2.Options{DeltaIdleTTL: sdkDeltaTTL, DeltaSweep: sdkSweep, ActivityTimeout: sdkActivityTTL}},
		})
	}
	rep := checkKit(t, build, nil)
	require.Empty(t, rep.Failed())
	require.Equal(t, []string{"K5.a"}, rep.Skipped())
	t.Run("RunKit", func(t *testing.T) {
		k, err := build()
		require.NoError(t, err)
		require.Equal(t, connector.ModeEdit, k.Mode())
		rep := imv2test.RunKit(t, k, &imv2test.Config{Run: `^K(1\.c|3\.b)$`})
		require.Equal(t, []string{"K1.c", "K3.b"}, []string{rep.Results[0].Check, rep.Results[1].Check})
		require.Empty(t, rep.Failed())
		require.Empty(t, rep.Skipped())
	})
}

// TestRunKit_K6_K12_LongBoundsSkippedWithTheFix: a kit left at its
// default bounds (minutes) has K6.c and K12.d skipped, each saying the
// bound it has and the one line that makes it observable; a short TTL
// swept at the default 30 s still skips K6.c, naming the sweep, while a
// short activity timeout runs K12.d.
func TestRunKit_K6_K12_LongBoundsSkippedWithTheFix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		channel *imv2.Options
		skipped []string
		says    string
	}{
		{"defaults", nil, []string{"K6.c", "K12.d"}, "(the default)"},
		{"default sweep", &imv2.Options{DeltaIdleTTL: time.Second, ActivityTimeout: time.Second},
			[]string{"K6.c"}, "DeltaIdleTTL 1s + DeltaSweep 30s (the default)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := checkKit(t, func() (*connector.Connector, error) {
				return connector.New(testcard.IM("editchat", "Edit chat"), &editChat{},
					&connector.Options{Advanced: connector.Advanced{Channel: c.channel}})
			}, &imv2test.Config{Run: `^K(6\.c|12\.d)$`})
			require.Empty(t, rep.Failed())
			require.Equal(t, c.skipped, rep.Skipped())
			for _, name := range rep.Skipped() {
				r, _ := rep.Result(name)
				require.Contains(t, r.Reason, c.says)
				require.True(t, strings.Contains(r.Reason, "Options.Advanced.Channel = &imv2.Options{"), r.Reason)
			}
		})
	}
}

// Platforms of the other modes, each with typing and editChat's rate
// limit: a Drafter (stream), an Editor without a Finisher (edit: the
// final is one more Edit) and a plain Platform (buffer).
type (
	bufferedChat struct{ c editChat }
	streamChat   struct{ bufferedChat }
	plainEditor  struct{ bufferedChat }
)

func (b *bufferedChat) Post(ctx context.Context, to connector.Conversation, m *connector.Message) error {
	return b.c.Post(ctx, to, m)
}

func (b *bufferedChat) Typing(ctx context.Context, to connector.Conversation, a imv2.ChatActivity) error {
	return b.c.Typing(ctx, to, a)
}

// postOnly is the smallest platform: Post, nothing else.
type postOnly struct{}

func (postOnly) Post(context.Context, connector.Conversation, *connector.Message) error { return nil }

func (s *streamChat) Draft(_ context.Context, _ connector.Conversation, d connector.Draft) (string, error) {
	return "d-" + d.MessageID, nil
}

func (e *plainEditor) PostDraft(ctx context.Context, to connector.Conversation, messageID, text string) (string, error) {
	return e.c.PostDraft(ctx, to, messageID, text)
}

func (e *plainEditor) Edit(ctx context.Context, to connector.Conversation, handle, text string) error {
	return e.c.Edit(ctx, to, handle, text)
}

// checkKit builds a kit with build and runs CheckKit on it in a synctest
// bubble (the suite's waits and the kit's timers on its fake clock), then
// reports the checks as subtests of t, as RunKit does.
func checkKit(t *testing.T, build func() (*connector.Connector, error), cfg *imv2test.Config) *imv2test.Report {
	t.Helper()
	var rep *imv2test.Report
	checkInBubble(t, build, cfg, &rep)
	imv2test.ReportTo(t, rep)
	return rep
}

// checkInBubble is checkKit without the subtests, for a run expected to
// fail some checks.
func checkInBubble(t *testing.T, build func() (*connector.Connector, error), cfg *imv2test.Config, rep **imv2test.Report) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		k, err := build()
		require.NoError(t, err)
		*rep, err = imv2test.CheckKit(t.Context(), k, cfg)
		require.NoError(t, err)
	})
}

// TestRunKit_K1_K12_EveryMode: the kit's own observation serves every
// mode — stream (drafts), edit without a Finisher (the final is an Edit)
// and buffer — with no check failed and only the mode's inapplicable
// checks skipped; a platform without a typing indicator has the checks
// that observe typing skipped, not failed (C5: it shows nothing). The
// runs are on a synctest bubble's clock (CheckKit).
func TestRunKit_K1_K12_EveryMode(t *testing.T) {
	t.Parallel()
	short := &imv2.Options{DeltaIdleTTL: sdkDeltaTTL, DeltaSweep: sdkSweep, ActivityTimeout: sdkActivityTTL}
	for _, c := range []struct {
		name     string
		mode     connector.Mode
		platform connector.Platform
		skipped  []string
	}{
		{"stream", connector.ModeStream, &streamChat{}, []string{"K1.c", "K5.a"}},
		{"edit", connector.ModeEdit, &plainEditor{}, []string{"K1.c", "K5.a"}},
		{"buffer", connector.ModeBuffer, &bufferedChat{}, []string{"K1.c", "K2.d"}},
		// No Typer: the checks that observe typing are not applicable.
		{"post only", connector.ModeBuffer, postOnly{}, []string{"K1.c", "K2.d", "K12.a", "K12.b", "K12.d", "K12.e"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rep := checkKit(t, func() (*connector.Connector, error) {
				return connector.New(testcard.IM("anychat", "Any chat"), c.platform,
					&connector.Options{Mode: c.mode, Advanced: connector.Advanced{Channel: short}})
			}, nil)
			require.Empty(t, rep.Failed())
			require.Equal(t, c.skipped, rep.Skipped())
		})
	}
}
