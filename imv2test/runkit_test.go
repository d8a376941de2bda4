package imv2test_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/internal/testcard"
)

// editChat is a pretend chat a newcomer writes: post, edit, typing, and a
// rate limit on every 5th post; it tells the suite what it shows.
type editChat struct {
	rec   *imv2test.Recorder
	posts atomic.Int64
}

func (c *editChat) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	if c.posts.Add(1)%5 == 0 {
		return connector.RetryAfter(errors.New("429 Too Many Requests"), 100*time.Millisecond)
	}
	e := imv2test.Event{Event: "final", MessageID: m.MessageID, Text: &m.Text}
	for _, f := range m.Files {
		e.Files = append(e.Files, imv2test.EventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
	}
	c.rec.Record(e)
	return nil
}

func (c *editChat) PostDraft(_ context.Context, _ connector.Conversation, messageID, text string) (string, error) {
	c.rec.Record(imv2test.Event{Event: "post", MessageID: messageID, Text: &text})
	return messageID, nil
}

func (c *editChat) Edit(_ context.Context, _ connector.Conversation, handle, text string) error {
	c.rec.Record(imv2test.Event{Event: "edit", MessageID: handle, Text: &text})
	return nil
}

func (c *editChat) Finish(ctx context.Context, to connector.Conversation, _ string, m *connector.Message) error {
	return c.Post(ctx, to, m)
}

func (c *editChat) Typing(_ context.Context, _ connector.Conversation, a imv2.ChatActivity) error {
	if a.Status == imv2.ActivityIdle {
		c.rec.Record(imv2test.Event{Event: "typing_clear"})
	} else {
		c.rec.Record(imv2test.Event{Event: "typing", Status: string(a.Status), ToolName: a.ToolName})
	}
	return nil
}

// TestRunKit_K1_K12_KitConnectorInProcess: a connector.New Connector in
// edit mode, rate-limited every 5th post, passes the suite in process
// with RunKit in three lines; the only skips are the checks its mode or
// missing API key make inapplicable.
func TestRunKit_K1_K12_KitConnectorInProcess(t *testing.T) {
	t.Parallel()
	rec := &imv2test.Recorder{}
	k, err := connector.New(testcard.IM("editchat", "Edit chat"), &editChat{rec: rec}, &connector.Options{
		Advanced: connector.Advanced{Channel: &imv2.Options{DeltaIdleTTL: sdkDeltaTTL, DeltaSweep: sdkSweep, ActivityTimeout: sdkActivityTTL}},
	})
	require.NoError(t, err)
	require.Equal(t, connector.ModeEdit, k.Mode())
	rep := imv2test.RunKit(t, k, imv2test.Connector{Observer: rec,
		DeltaIdleTTL: sdkDeltaTTL, DeltaSweep: sdkSweep, ActivityTimeout: sdkActivityTTL}, nil)
	require.Empty(t, rep.Failed())
	require.Equal(t, []string{"K1.c", "K5.a"}, rep.Skipped())
}
