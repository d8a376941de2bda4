package display_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector/internal/display"
	"github.com/xagentkit/imv2/fakeclock"
)

func editTarget(t *testing.T, opts display.Options) (*display.Target, *rec, *fakeclock.Clock) {
	t.Helper()
	tg, r, clk := newTarget(t, caps{mode: display.Edit}, opts)
	require.Equal(t, display.Edit, tg.Mode())
	return tg, r, clk
}

// 1,000 deltas spread evenly over 5 s at a 500 ms interval make one post and
// at most ten edits, each at least an interval apart and each carrying the
// newest text; the final edits that same message to exactly its text.
func TestEdit_D8_M11_ThousandDeltasAtMostElevenCalls(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := editTarget(t, display.Options{Interval: 500 * time.Millisecond})

	var sb strings.Builder
	shownAt := map[time.Duration]string{} // fake time → text so far after that delta
	for i := range 1000 {
		sb.WriteString("w ")
		require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", sb.String()))
		shownAt[time.Duration(i)*5*time.Millisecond] = sb.String()
		clk.Advance(5 * time.Millisecond)
	}
	stitched := sb.String()

	calls := r.all()
	require.LessOrEqual(t, len(calls), 11, "post + edits before the final")
	require.Equal(t, "post", calls[0].Op)
	require.Equal(t, 1, r.count("post"))
	require.Equal(t, 0, r.count("send", "finish"))
	for i, c := range calls {
		if i > 0 {
			require.Equal(t, "edit", c.Op)
			require.Equal(t, calls[0].Handle, c.Handle)
			require.GreaterOrEqual(t, c.At-calls[i-1].At, 500*time.Millisecond, "throttle")
			require.Greater(t, len(c.Text), len(calls[i-1].Text), "each edit shows newer text")
		}
		// Coalescing shows the newest text at the time of the call: the
		// post carries the first delta, an edit fired at T every delta
		// before T (the delta at T itself arrives after the timer).
		latest := shownAt[0]
		for at, s := range shownAt {
			if at < c.At && len(s) > len(latest) {
				latest = s
			}
		}
		require.Equal(t, latest, c.Text, "call %d at %v", i, c.At)
	}
	require.Equal(t, stitched, calls[len(calls)-1].Text)

	final := stitched + "and the final text differs"
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", final, 1)))
	all := r.all()
	require.Len(t, all, len(calls)+1)
	last := all[len(all)-1]
	require.Equal(t, call{Op: "finish", Channel: "ch", MessageID: "m1", Handle: calls[0].Handle, Text: final, Files: 1, At: last.At}, last)
	require.Zero(t, tg.OpenDrafts())
	require.Zero(t, clk.Pending(), "the final stops the message's timers")
}

// Drafts within one interval are coalesced into one edit with the newest
// text; a draft after a quiet interval is edited at once.
func TestEdit_D8_CoalescesToNewestText(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := editTarget(t, display.Options{}) // default interval 500 ms

	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "a"))
	clk.Advance(100 * time.Millisecond)
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "ab"))
	clk.Advance(100 * time.Millisecond)
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "abc"))
	require.Equal(t, []string{"post:a"}, opsText(r.all()))

	clk.Advance(299 * time.Millisecond)
	require.Equal(t, 1, len(r.all()), "no edit before the interval is over")
	clk.Advance(1 * time.Millisecond)
	require.Equal(t, []string{"post:a", "edit:abc"}, opsText(r.all()))

	clk.Advance(2 * time.Second) // quiet: the timer found nothing new
	require.Equal(t, 2, len(r.all()))
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "abcd"))
	require.Equal(t, []string{"post:a", "edit:abc", "edit:abcd"}, opsText(r.all()))
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "abcd", 0)))
	require.Equal(t, []string{"post:a", "edit:abc", "edit:abcd", "finish:abcd"}, opsText(r.all()))
}

// A final that arrives while a coalesced edit waits cancels it: nothing is
// edited after the final.
func TestEdit_M11_NoEditAfterFinal(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := editTarget(t, display.Options{})
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "a"))
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "ab"))
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "final", 0)))
	clk.Advance(time.Minute)
	require.Equal(t, []string{"post:a", "finish:final"}, opsText(r.all()))
}

// A failed final keeps the temporary message: the error comes back
// unchanged (A8) and the retry finishes the same message instead of
// posting a second one (M11).
func TestEdit_M11_A8_RetriedFinalFinishesSameMessage(t *testing.T) {
	ctx := context.Background()
	tg, r, _ := editTarget(t, display.Options{})
	boom := errors.New("discord: 503")
	r.fail("finish", boom, nil)

	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "partial"))
	err := tg.PostMessage(ctx, "ch", msg("m1", "whole", 2))
	require.Same(t, boom, err)
	require.Equal(t, 1, tg.OpenDrafts())

	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "whole", 2)))
	fin := r.all("finish")
	require.Len(t, fin, 2)
	require.Equal(t, fin[0].Handle, fin[1].Handle)
	require.Equal(t, r.all("post")[0].Handle, fin[1].Handle)
	require.Equal(t, 0, r.count("send"))
	require.Zero(t, tg.OpenDrafts())
}

// A failed first post is retried by the next interval's edit, and a final
// with nothing posted is sent as one new message.
func TestEdit_D8_FailedPostRetriedThenSendIfNeverShown(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := editTarget(t, display.Options{})
	boom := errors.New("post failed")
	r.fail("post", boom, nil)

	require.ErrorIs(t, tg.UpdateDraft(ctx, "ch", "m1", "a"), boom)
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "ab"))
	clk.Advance(500 * time.Millisecond)
	require.Equal(t, []string{"post:a", "post:ab"}, opsText(r.all()))
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "abc", 0)))
	require.Equal(t, "finish:abc", opsText(r.all())[2])

	// Never shown: the post keeps failing, the final is a plain send.
	r.fail("post", boom)
	require.ErrorIs(t, tg.UpdateDraft(ctx, "ch", "m2", "x"), boom)
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m2", "xy", 0)))
	require.Equal(t, []string{"post:x", "send:xy"}, opsText(r.all()[3:]))
}

// A first post failing with ErrSkipDraft (it may be shown) is not posted
// again: later drafts of the message show nothing, no edit is armed, and
// the final is one plain send. Another message still gets its draft.
func TestEdit_D8_M11_PostWithUnknownOutcomeSkipsTheDraft(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := editTarget(t, display.Options{})
	lost := fmt.Errorf("%w: response lost", display.ErrSkipDraft)
	r.fail("post", lost, nil)

	require.ErrorIs(t, tg.UpdateDraft(ctx, "ch", "m1", "a"), display.ErrSkipDraft)
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "ab"))
	clk.Advance(time.Minute)
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "abc"))
	clk.Advance(time.Minute)
	require.Equal(t, []string{"post:a"}, opsText(r.all()), "no second temporary message")
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "abcd", 0)))
	require.Equal(t, []string{"post:a", "send:abcd"}, opsText(r.all()))
	require.Zero(t, tg.OpenDrafts())

	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m2", "x"))
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m2", "xy", 0)))
	require.Equal(t, []string{"post:x", "finish:xy"}, opsText(r.all()[2:]))
}

// Messages of different channels and ids have their own drafts.
func TestEdit_D8_DraftsPerChannelAndMessage(t *testing.T) {
	ctx := context.Background()
	tg, r, _ := editTarget(t, display.Options{})
	require.NoError(t, tg.UpdateDraft(ctx, "c1", "m1", "one"))
	require.NoError(t, tg.UpdateDraft(ctx, "c2", "m1", "two"))
	require.NoError(t, tg.UpdateDraft(ctx, "c1", "m2", "three"))
	require.Equal(t, 3, r.count("post"))
	require.Equal(t, 3, tg.OpenDrafts())
	require.NoError(t, tg.PostMessage(ctx, "c2", msg("m1", "TWO", 0)))
	fin := r.all("finish")
	require.Len(t, fin, 1)
	require.Equal(t, "c2", fin[0].Channel)
	require.Equal(t, r.all("post")[1].Handle, fin[0].Handle)
	require.Equal(t, 2, tg.OpenDrafts())
}

// opsText renders calls as "op:text" for compact comparisons.
func opsText(cs []call) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Op + ":" + c.Text
	}
	return out
}
