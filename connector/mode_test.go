package connector

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"

	"github.com/xagentkit/imv2/connector/internal/display"
)

// TestMode_NumberedAsTheMachinery: Mode converts to the display
// machinery's by value, so both must number the strategies alike.
func TestMode_NumberedAsTheMachinery(t *testing.T) {
	for m, want := range map[Mode]display.Mode{
		ModeStream: display.Stream, ModeEdit: display.Edit, ModeBuffer: display.Buffer,
	} {
		if m.internal() != want {
			t.Errorf("%v is %v inside; want %v", m, m.internal(), want)
		}
	}
}

// TestMode_D8_DrafterAndEditorGetsStream: a platform that is both a
// Drafter and an Editor gets ModeStream unless Options.Mode says
// otherwise, as ModeAuto's doc says.
func TestMode_D8_DrafterAndEditorGetsStream(t *testing.T) {
	k, _ := newUnit(t, both{}, false, Options{})
	if k.Mode() != ModeStream {
		t.Fatalf("mode %v; want stream", k.Mode())
	}
	k, _ = newUnit(t, both{}, false, Options{Mode: ModeEdit})
	if k.Mode() != ModeEdit {
		t.Fatalf("mode %v; want edit when asked", k.Mode())
	}
}

// both is a platform with a draft API and editable messages.
type both struct{}

func (both) Post(context.Context, Conversation, *Message) error { return nil }
func (both) Draft(context.Context, Conversation, Draft) (string, error) {
	return "h", nil
}
func (both) PostDraft(context.Context, Conversation, string, string) (string, error) {
	return "h", nil
}
func (both) Edit(context.Context, Conversation, string, string) error { return nil }

// TestOptions_ChannelFieldsTheKitOwnsAreRefused: the Channel options'
// stores, clock and logger are the kit's; New fails when the author sets
// one rather than overwriting it silently.
func TestOptions_ChannelFieldsTheKitOwnsAreRefused(t *testing.T) {
	for name, ch := range map[string]*imv2.Options{
		"Clock":     {Clock: clock.System{}},
		"Logger":    {Logger: slog.New(slog.DiscardHandler)},
		"Pending":   {Pending: imv2.NewMemoryPendingStore(1)},
		"Completed": {Completed: imv2.NewMemoryCompletedStore(1, time.Hour, clock.System{})},
	} {
		if _, err := New(unitCard(false), both{}, &Options{Advanced: Advanced{Channel: ch}}); err == nil {
			t.Errorf("Advanced.Channel.%s set: New succeeded; want an error", name)
		}
	}
	if _, err := New(unitCard(false), both{}, &Options{Advanced: Advanced{Channel: &imv2.Options{AckTimeout: time.Second}}}); err != nil {
		t.Errorf("Advanced.Channel.AckTimeout set: %v", err)
	}
}
