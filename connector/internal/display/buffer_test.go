package display_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector/internal/display"
)

// Buffer mode shows no temporary text: one send per message with the
// final's text and files, never a draft, post or edit, also after deltas
// (K5, D8).
func TestBuffer_K5_OneSendNoTemporaryText(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := newTarget(t, caps{mode: display.Buffer}, display.Options{})
	require.Equal(t, display.Buffer, tg.Mode())
	for i := range 3 {
		id := fmt.Sprintf("m%d", i)
		for j := range i * 50 { // m0 has no deltas (M13)
			requireDraft(t, tg, tg.UpdateDraft(ctx, "ch", id, fmt.Sprint(j)))
			clk.Advance(10 * time.Millisecond)
		}
		clk.Advance(time.Minute)
		require.NoError(t, tg.PostMessage(ctx, "ch", msg(id, "final "+id, i)))
	}
	require.Equal(t, []call{
		{Op: "send", Channel: "ch", MessageID: "m0", Text: "final m0", Files: 0, At: r.all()[0].At},
		{Op: "send", Channel: "ch", MessageID: "m1", Text: "final m1", Files: 1, At: r.all()[1].At},
		{Op: "send", Channel: "ch", MessageID: "m2", Text: "final m2", Files: 2, At: r.all()[2].At},
	}, r.all())
	require.Zero(t, tg.OpenDrafts())
	require.Zero(t, clk.Pending(), "buffer mode keeps no timers")
}
