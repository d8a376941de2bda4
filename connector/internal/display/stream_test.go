package display_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector/internal/display"
)

func streamTarget(t *testing.T) (*display.Target, *rec) {
	t.Helper()
	tg, r, _ := newTarget(t, caps{mode: display.Stream}, display.Options{})
	require.Equal(t, display.Stream, tg.Mode())
	return tg, r
}

// Every draft reaches the platform at once and in order, with the whole
// text, the suffix new since the last accepted draft, and the handle of the
// first one; the final finishes that handle.
func TestStream_D8_EveryDraftInOrderWithSuffixes(t *testing.T) {
	ctx := context.Background()
	tg, r := streamTarget(t)
	texts := []string{"He", "Hello", "Hello, wo", "Hello, world", "Hello, world! 你好"}
	for _, s := range texts {
		require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", s))
	}
	require.Equal(t, []call{
		{Op: "draft", Channel: "ch", MessageID: "m1", Handle: "", Text: "He", Suffix: "He"},
		{Op: "draft", Channel: "ch", MessageID: "m1", Handle: "s-m1", Text: "Hello", Suffix: "llo"},
		{Op: "draft", Channel: "ch", MessageID: "m1", Handle: "s-m1", Text: "Hello, wo", Suffix: ", wo"},
		{Op: "draft", Channel: "ch", MessageID: "m1", Handle: "s-m1", Text: "Hello, world", Suffix: "rld"},
		{Op: "draft", Channel: "ch", MessageID: "m1", Handle: "s-m1", Text: "Hello, world! 你好", Suffix: "! 你好"},
	}, r.all())

	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "Hello, world! 你好.", 1)))
	fin := r.all("finish")
	require.Len(t, fin, 1)
	require.Equal(t, "s-m1", fin[0].Handle)
	require.Equal(t, "Hello, world! 你好.", fin[0].Text)
	require.Equal(t, 1, fin[0].Files)
	require.Zero(t, tg.OpenDrafts())
}

// A draft the platform refused is not counted: the next suffix carries its
// text too, so an append-style stream loses nothing.
func TestStream_D8_FailedDraftSuffixCarriesMissedText(t *testing.T) {
	ctx := context.Background()
	tg, r := streamTarget(t)
	boom := errors.New("rate limited")
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "ab"))
	r.fail("draft", boom, nil)
	require.ErrorIs(t, tg.UpdateDraft(ctx, "ch", "m1", "abcd"), boom)
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "abcdef"))
	d := r.all("draft")
	require.Len(t, d, 3)
	require.Equal(t, "cdef", d[2].Suffix)
	require.False(t, d[2].Reset)
}

// A failed first draft leaves no handle: the next one starts the stream.
func TestStream_D8_FailedFirstDraftStartsAgain(t *testing.T) {
	ctx := context.Background()
	tg, r := streamTarget(t)
	r.fail("draft", errors.New("down"), nil)
	require.Error(t, tg.UpdateDraft(ctx, "ch", "m1", "a"))
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "ab"))
	d := r.all("draft")
	require.Equal(t, "", d[1].Handle)
	require.Equal(t, "ab", d[1].Suffix)
}

// Text that does not extend the accepted text is a reset; an empty or
// unchanged text is not sent.
func TestStream_D8_ResetAndNothingNew(t *testing.T) {
	ctx := context.Background()
	tg, r := streamTarget(t)
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", ""))
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "abc"))
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "abc"))
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "xyz"))
	d := r.all("draft")
	require.Len(t, d, 2)
	require.Equal(t, call{Op: "draft", Channel: "ch", MessageID: "m1", Handle: "s-m1", Text: "xyz", Suffix: "xyz", Reset: true}, d[1])
}

// TestStream_D8_M11_FirstDraftWithUnknownOutcomeSkipsTheDraft: a first
// Draft failing with ErrSkipDraft (it may have created the drafted message)
// ends the message's drafts; its final goes to Post, and the next message
// streams as usual.
func TestStream_D8_M11_FirstDraftWithUnknownOutcomeSkipsTheDraft(t *testing.T) {
	ctx := context.Background()
	tg, r := streamTarget(t)
	r.fail("draft", fmt.Errorf("%w: response lost", display.ErrSkipDraft), nil)

	require.ErrorIs(t, tg.UpdateDraft(ctx, "ch", "m1", "a"), display.ErrSkipDraft)
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "ab"))
	require.Equal(t, []string{"draft:a"}, opsText(r.all()), "no second drafted message")
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "abc", 0)))
	require.Equal(t, []string{"draft:a", "send:abc"}, opsText(r.all()))
	require.Zero(t, tg.OpenDrafts())

	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m2", "x"))
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m2", "xy", 0)))
	require.Equal(t, []string{"draft:x", "finish:xy"}, opsText(r.all()[2:]))
}
