package display_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector/internal/display"
)

// Beyond MaxDrafts a new message is refused a draft (delta_limit_exceeded,
// ErrFull) and shown by its final alone; open drafts are never evicted, so
// their finals still finish their own temporary message (D9, M11).
func TestBounds_D9_CapRefusesNewDrafts(t *testing.T) {
	for _, mode := range []display.Mode{display.Stream, display.Edit} {
		t.Run(modeName[mode], func(t *testing.T) {
			ctx := context.Background()
			tg, r, _ := newTarget(t, caps{mode: mode}, display.Options{MaxDrafts: 2})
			require.NoError(t, tg.UpdateDraft(ctx, "c1", "m1", "one"))
			require.NoError(t, tg.UpdateDraft(ctx, "c2", "m2", "two"))
			err := tg.UpdateDraft(ctx, "c1", "m3", "three")
			require.ErrorIs(t, err, display.ErrFull)
			require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeDeltaLimitExceeded})
			require.Equal(t, 2, tg.OpenDrafts())
			require.Equal(t, 2, r.count("post", "draft"), "the refused draft is not shown")

			require.NoError(t, tg.PostMessage(ctx, "c1", msg("m3", "three!", 0)))
			require.NoError(t, tg.PostMessage(ctx, "c1", msg("m1", "one!", 0)))
			require.Equal(t, []string{"send:three!", "finish:one!"}, opsText(r.all("send", "finish")))

			// The final freed a slot.
			require.NoError(t, tg.UpdateDraft(ctx, "c1", "m4", "four"))
			require.Equal(t, 2, tg.OpenDrafts())
		})
	}
}

// A draft idle for DraftTTL is dropped and, where Discard can, its temporary
// message removed; an update within the TTL keeps it. A late final is then
// a new message, not a second one beside stale text (D9, M11); where the
// message could not be removed, the late final finishes it in place.
func TestBounds_D9_TTLDropsStaleDraft(t *testing.T) {
	platforms := map[string]caps{
		"edit+discard":   {mode: display.Edit, discard: true},
		"stream+discard": {mode: display.Stream, discard: true},
		"edit":           {mode: display.Edit},
	}
	for name, p := range platforms {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			tg, r, clk := newTarget(t, p, display.Options{DraftTTL: time.Minute})
			require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "a"))
			clk.Advance(30 * time.Second)
			require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "ab"))
			clk.Advance(59 * time.Second) // 89 s: last update 59 s ago
			require.Equal(t, 1, tg.OpenDrafts())
			require.Zero(t, r.count("discard"))

			clk.Advance(time.Second) // 90 s: idle for the TTL
			require.Zero(t, tg.OpenDrafts())
			require.Zero(t, clk.Pending(), "a dropped draft keeps no timer")
			if name == "edit" {
				require.Zero(t, r.count("discard"))
			} else {
				d := r.all("discard")
				require.Len(t, d, 1)
				require.Equal(t, r.all("post", "draft")[0].Handle+map[bool]string{true: "s-m1"}[name == "stream+discard"], d[0].Handle)
				require.Equal(t, 90*time.Second, d[0].At)
			}

			require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "abc", 0)))
			last := r.all()[len(r.all())-1]
			want := "send:abc"
			if name == "edit" {
				want = "finish:abc" // still shown: finished in place, not posted beside
			}
			require.Equal(t, want, last.Op+":"+last.Text)
		})
	}
}

// Close stops every timer and refuses later calls with a retryable
// "closed" error and no platform call.
func TestClose_StopsTimersAndRefuses(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := newTarget(t, caps{mode: display.Edit, typing: true}, display.Options{})
	require.NoError(t, tg.SetActivity(ctx, "ch", thinking))
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "a"))
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "ab")) // coalesced edit pending
	require.NoError(t, tg.SetActivity(ctx, "ch", thinking))
	require.NotZero(t, clk.Pending())
	n := r.count()

	require.NoError(t, tg.Close())
	require.NoError(t, tg.Close())
	require.Zero(t, clk.Pending())
	clk.Advance(time.Hour)
	for _, err := range []error{
		tg.UpdateDraft(ctx, "ch", "m1", "abc"),
		tg.PostMessage(ctx, "ch", msg("m1", "abc", 0)),
		tg.SetActivity(ctx, "ch", thinking),
	} {
		require.ErrorIs(t, err, imv2.ErrClosed)
		require.True(t, imv2.SafeToRetry(err))
	}
	require.Equal(t, n, r.count())
}

// blocking is a platform whose Edit waits for its context, as a hung
// platform call would.
type blocking struct {
	*rec
	entered chan struct{}
}

func (b blocking) Edit(ctx context.Context, _, _, _ string) error {
	close(b.entered)
	<-ctx.Done()
	return ctx.Err()
}

// With the system clock, Close cancels a timer's platform call in flight
// and returns only after it ended: no goroutine is left (goleak checks).
func TestClose_CancelsCallInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := blocking{rec: newRec(nil), entered: make(chan struct{})}
	tg, err := display.New(b, &display.Options{Mode: display.Edit, Interval: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "a"))
	require.NoError(t, tg.UpdateDraft(ctx, "ch", "m1", "ab")) // edit from a timer
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the coalesced edit never ran")
	}
	require.NoError(t, tg.Close())
}

// New takes the mode it is given (the kit resolved ModeAuto) and rejects
// none, an unknown one and bad options.
func TestNew_ModesAndOptions(t *testing.T) {
	r := newRec(nil)
	for _, tc := range []struct {
		p    display.Platform
		opts *display.Options
		want display.Mode // 0: New fails
	}{
		{r, &display.Options{Mode: display.Stream}, display.Stream},
		{r, &display.Options{Mode: display.Edit}, display.Edit},
		{r, &display.Options{Mode: display.Buffer}, display.Buffer},
		{r, nil, 0},
		{r, &display.Options{Mode: display.Mode(9)}, 0},
		{r, &display.Options{Mode: display.Edit, Interval: -1}, 0},
		{r, &display.Options{Mode: display.Edit, MaxDrafts: -1}, 0},
		{nil, &display.Options{Mode: display.Edit}, 0},
	} {
		tg, err := display.New(tc.p, tc.opts)
		if tc.want == 0 {
			require.Error(t, err, "%+v", tc.opts)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, tg.Mode())
		require.NoError(t, tg.Close())
	}
}

// Many messages on many goroutines while the clock runs: each message is
// shown by exactly one final with its text, nothing after it, at most one
// post per message (-race checks the locking).
func TestConcurrent_D8_M11_ManyMessages(t *testing.T) {
	ctx := context.Background()
	// The ticker spins, so fake time flies: a TTL of a year keeps every
	// draft alive while its goroutine waits for the CPU.
	tg, r, clk := newTarget(t, caps{mode: display.Edit, typing: true},
		display.Options{DraftTTL: 365 * 24 * time.Hour})
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	ticker.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				clk.Advance(50 * time.Millisecond)
			}
		}
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			ch := fmt.Sprintf("c%d", g%3)
			for i := range 20 {
				id := fmt.Sprintf("g%d-m%d", g, i)
				_ = tg.SetActivity(ctx, ch, thinking)
				text := ""
				for j := range 10 {
					text += fmt.Sprint(j)
					if err := tg.UpdateDraft(ctx, ch, id, text); err != nil {
						t.Error(err)
					}
				}
				if err := tg.PostMessage(ctx, ch, msg(id, "final "+id, 0)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	ticker.Wait()
	clk.Advance(time.Hour)

	byMsg := map[string][]call{}
	handleMsg := map[string]string{}
	for _, c := range r.all() {
		switch c.Op {
		case "post":
			handleMsg[c.Handle] = c.MessageID
			byMsg[c.MessageID] = append(byMsg[c.MessageID], c)
		case "edit":
			id := handleMsg[c.Handle]
			byMsg[id] = append(byMsg[id], c)
		case "send", "finish":
			byMsg[c.MessageID] = append(byMsg[c.MessageID], c)
		}
	}
	require.Len(t, byMsg, 160)
	for id, cs := range byMsg {
		last := cs[len(cs)-1]
		require.Contains(t, []string{"send", "finish"}, last.Op, id)
		require.Equal(t, "final "+id, last.Text)
		posts, finals := 0, 0
		for _, c := range cs {
			switch c.Op {
			case "post":
				posts++
			case "send", "finish":
				finals++
			}
		}
		require.LessOrEqual(t, posts, 1, id)
		require.Equal(t, 1, finals, id)
	}
	require.Zero(t, tg.OpenDrafts())
	require.Zero(t, clk.Pending(), "typing timed out, drafts finished")
}
