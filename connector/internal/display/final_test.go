package display_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector/internal/display"
)

// In every mode the platform shows the final's text exactly once: a final
// without deltas (M13), with deltas that match it, and with deltas that
// differ (M11); text and files go in one call (M12).
func TestFinal_M11_M13_DisplayedTextEqualsFinal(t *testing.T) {
	cases := []struct {
		name   string
		deltas []string
		final  string
		files  int
	}{
		{"no deltas", nil, "only a final", 0},
		{"no deltas, files only", nil, "", 2},
		{"deltas match", []string{"Hel", "Hello"}, "Hello", 0},
		{"deltas differ", []string{"Hel", "Hello wrld"}, "Hello, world.", 1},
	}
	for _, mode := range []display.Mode{display.Stream, display.Edit, display.Buffer} {
		for _, tc := range cases {
			t.Run(modeName[mode]+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				tg, r, clk := newTarget(t, caps{mode: mode}, display.Options{})
				require.Equal(t, mode, tg.Mode())
				for _, d := range tc.deltas {
					requireDraft(t, tg, tg.UpdateDraft(ctx, "ch", "m1", d))
					clk.Advance(display.DefaultInterval)
				}
				require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", tc.final, tc.files)))

				finals := r.all("send", "finish")
				require.Len(t, finals, 1, "one call carries the final")
				require.Equal(t, tc.final, finals[0].Text)
				require.Equal(t, tc.files, finals[0].Files)
				last := r.all()[len(r.all())-1]
				require.Equal(t, finals[0], last, "nothing is shown after the final")
				// One platform message per message_id: a send, a post or
				// a first draft each create one.
				created := r.count("send", "post")
				for _, d := range r.all("draft") {
					if d.Handle == "" {
						created++
					}
				}
				require.Equal(t, 1, created, "calls: %v", opsText(r.all()))
				if mode == display.Buffer || len(tc.deltas) == 0 {
					require.Equal(t, "send", finals[0].Op)
				} else {
					require.Equal(t, "finish", finals[0].Op)
				}
				require.Zero(t, tg.OpenDrafts())
			})
		}
	}
}

// The platform's error comes back unchanged from PostMessage in every mode,
// so the platform's Retryable/Permanent mark reaches the ack (A8).
func TestFinal_A8_PlatformErrorUnchanged(t *testing.T) {
	for _, mode := range []display.Mode{display.Stream, display.Edit, display.Buffer} {
		for _, withDelta := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/delta=%v", mode, withDelta), func(t *testing.T) {
				ctx := context.Background()
				tg, r, _ := newTarget(t, caps{mode: mode}, display.Options{})
				perm := errors.New("forbidden")
				r.fail("send", perm)
				r.fail("finish", perm)
				if withDelta {
					requireDraft(t, tg, tg.UpdateDraft(ctx, "ch", "m1", "x"))
				}
				err := tg.PostMessage(ctx, "ch", msg("m1", "x", 0))
				require.Same(t, perm, err)
			})
		}
	}
}

// A nil message is refused without a platform call.
func TestFinal_NilMessage(t *testing.T) {
	tg, r, _ := newTarget(t, caps{mode: display.Buffer}, display.Options{})
	require.Error(t, tg.PostMessage(context.Background(), "ch", nil))
	require.Zero(t, r.count())
}
