package imv2

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDelta_D8_StreamingTargetGetsTextSoFarThenFinal(t *testing.T) {
	target := newStreamTarget()
	c, w, _ := newConnector(t, target, nil)
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 1, "Hel")))
	require.Equal(t, "Hel", recv(t, target.drafted))
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 2, "lo")))
	require.Equal(t, "Hello", recv(t, target.drafted))
	// M11: the final's text is the body, even when it differs from the stitched deltas.
	p := finalPacket(t, "a1", "Hello, world")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
	require.Equal(t, []ChatMessage{{MessageID: "a1", Text: "Hello, world"}}, target.posts)
}

func TestDelta_D8_K5_NonStreamingTargetGetsOneSend(t *testing.T) {
	target := newRecTarget()
	c, w, _ := newConnector(t, target, nil)
	for i, s := range []string{"a", "b", "c"} {
		require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", int64(i+1), s)))
	}
	w.none(t)
	require.Equal(t, 0, target.postCount("a1"), "K5: no temporary text")
	p := finalPacket(t, "a1", "abc")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
	require.Equal(t, 1, target.postCount("a1"))
}

func TestDelta_D3_RetransmissionIdempotentConflictRejected(t *testing.T) {
	target := newStreamTarget()
	c, w, _ := newConnector(t, target, nil)
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 1, "one ")))
	recv(t, target.drafted)
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 2, "two")))
	recv(t, target.drafted)
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 1, "one "))) // same pair, same text
	w.none(t)
	conflict := deltaPacket(t, "a1", 2, "TWO")
	require.ErrorIs(t, c.Receive(context.Background(), conflict), &Error{Code: CodeDeltaSequenceConflict})
	e := w.next(t)
	require.Equal(t, TypeError, e.Type)
	require.Equal(t, CodeDeltaSequenceConflict, e.Error.Code, "D12")
	require.Equal(t, conflict.PacketID, e.ReplyTo, "D12: reply_to is the delta")
	require.Equal(t, "cch_1", e.ConnectorChannelID, "D12: same channel")
	require.Equal(t, []string{"one ", "one two"}, target.drafts, "no double append")
}

func TestDelta_D4_X4_GapRejectedNeverStitched(t *testing.T) {
	target := newStreamTarget()
	c, w, _ := newConnector(t, target, nil)
	start := deltaPacket(t, "a1", 2, "late start")
	require.ErrorIs(t, c.Receive(context.Background(), start), &Error{Code: CodeDeltaSequenceGap})
	require.Equal(t, CodeDeltaSequenceGap, w.next(t).Error.Code)

	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 1, "a")))
	recv(t, target.drafted)
	gap := deltaPacket(t, "a1", 3, "c")
	require.ErrorIs(t, c.Receive(context.Background(), gap), &Error{Code: CodeDeltaSequenceGap})
	e := w.next(t)
	require.Equal(t, gap.PacketID, e.ReplyTo)
	require.Equal(t, []string{"a"}, target.drafts)
}

func TestDelta_D10_S5_D11_FinalClearsStateAndLateDeltasIgnored(t *testing.T) {
	var events []Event
	target := newStreamTarget()
	c, w, _ := newConnector(t, target, &Options{Observer: ObserverFunc(func(e Event) {
		if e.Kind == EventDeltaIgnored {
			events = append(events, e)
		}
	})})
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 1, "a")))
	recv(t, target.drafted)
	p := finalPacket(t, "a1", "a")
	require.NoError(t, c.Receive(context.Background(), p))
	ackOf(t, p, w.next(t))
	c.mu.Lock()
	require.Empty(t, c.deltas, "D10: the final cleared the stream")
	c.mu.Unlock()
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 2, "b")))
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 1, "a")))
	w.none(t)
	require.Len(t, events, 2, "D11: ignored, no error packet")
	c.mu.Lock()
	require.Empty(t, c.deltas)
	c.mu.Unlock()
}

func TestDelta_D7_FilesInDeltaRejected(t *testing.T) {
	c, w, _ := newConnector(t, newRecTarget(), nil)
	p := deltaPacket(t, "a1", 1, "x")
	p.Payload = []byte(`{"message_id":"a1","sequence":1,"text":"x","files":[]}`)
	require.Error(t, c.Receive(context.Background(), p))
	require.Equal(t, CodeInvalidPacket, w.next(t).Error.Code)
}

func TestDelta_D9_S4_BoundsOnStreamsBytesAndIdleTTL(t *testing.T) {
	c, w, clk := newConnector(t, newRecTarget(), &Options{MaxOpenDeltas: 2, MaxDeltaBytes: 8 + 2*deltaOverhead, DeltaIdleTTL: time.Minute, DeltaSweep: 10 * time.Second})
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 1, "1234")))
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a2", 1, "x")))
	third := deltaPacket(t, "a3", 1, "x")
	require.ErrorIs(t, c.Receive(context.Background(), third), &Error{Code: CodeDeltaLimitExceeded})
	require.Equal(t, CodeDeltaLimitExceeded, w.next(t).Error.Code)

	big := deltaPacket(t, "a1", 2, "56789")
	require.ErrorIs(t, c.Receive(context.Background(), big), &Error{Code: CodeDeltaLimitExceeded})
	w.next(t)

	// Idle streams are dropped by the sweep; no timer runs afterwards.
	clk.Advance(30 * time.Second)
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a2", 2, "y"))) // keeps a2 alive
	clk.Advance(40 * time.Second)
	c.mu.Lock()
	require.Len(t, c.deltas, 1)
	require.NotNil(t, c.deltas["a2"])
	c.mu.Unlock()
	clk.Advance(2 * time.Minute)
	c.mu.Lock()
	require.Empty(t, c.deltas)
	require.Nil(t, c.sweep)
	c.mu.Unlock()
	require.Equal(t, 0, clk.Pending())

	// D5: a final for an expired stream is a final without deltas.
	p := finalPacket(t, "a1", "whole")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
}

func TestDelta_DraftErrorDoesNotFailFinal(t *testing.T) {
	target := &failingDrafts{recTarget: newRecTarget()}
	c, w, _ := newConnector(t, target, nil)
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 1, "x")))
	p := finalPacket(t, "a1", "x")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
}

type failingDrafts struct{ *recTarget }

func (f *failingDrafts) UpdateDraft(context.Context, string, string, string) error {
	return errors.New("edit refused")
}

func TestActivity_C5_C6_C7_ShownClearedAndTimedOut(t *testing.T) {
	target := newStreamTarget()
	c, w, clk := newConnector(t, target, &Options{ActivityTimeout: 30 * time.Second})
	require.NoError(t, c.Receive(context.Background(), activityPacket(t, ActivityThinking, "")))
	require.Equal(t, ActivityThinking, recv(t, target.acted).Status)
	require.NoError(t, c.Receive(context.Background(), activityPacket(t, ActivityTool, "web_search")))
	require.Equal(t, ChatActivity{Status: ActivityTool, ToolName: "web_search"}, recv(t, target.acted))
	require.NoError(t, c.Receive(context.Background(), activityPacket(t, ActivityIdle, "")))
	require.Equal(t, ActivityIdle, recv(t, target.acted).Status, "C6: idle clears")

	// C6: the first displayed delta clears it.
	require.NoError(t, c.Receive(context.Background(), activityPacket(t, ActivityThinking, "")))
	recv(t, target.acted)
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "a1", 1, "x")))
	recv(t, target.drafted)
	require.Equal(t, ActivityIdle, recv(t, target.acted).Status)

	// C6: a final clears it.
	require.NoError(t, c.Receive(context.Background(), activityPacket(t, ActivityThinking, "")))
	recv(t, target.acted)
	p := finalPacket(t, "a2", "done")
	require.NoError(t, c.Receive(context.Background(), p))
	ackOf(t, p, w.next(t))
	require.Equal(t, ActivityIdle, recv(t, target.acted).Status)

	// C7: a status nobody refreshes times out.
	require.NoError(t, c.Receive(context.Background(), activityPacket(t, ActivityTool, "calc")))
	recv(t, target.acted)
	clk.Advance(30 * time.Second)
	require.Equal(t, ActivityIdle, recv(t, target.acted).Status)
	w.none(t) // C1: activity is never acked
}

func TestActivity_C8_FailureNeverTouchesMessages(t *testing.T) {
	target := newStreamTarget()
	target.actErr = errors.New("typing API down")
	c, w, _ := newConnector(t, target, nil)
	require.NoError(t, c.Receive(context.Background(), activityPacket(t, ActivityThinking, "")))
	recv(t, target.acted)
	p := finalPacket(t, "a1", "x")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
	require.Equal(t, 1, target.postCount("a1"))
}

func TestActivity_C5_TargetWithoutActivityIsNoOp_C4_Rejected(t *testing.T) {
	c, w, _ := newConnector(t, newRecTarget(), nil)
	require.NoError(t, c.Receive(context.Background(), activityPacket(t, ActivityThinking, "")))
	w.none(t)
	bad := activityPacket(t, ActivityThinking, "")
	bad.Payload = []byte(`{"status":"thinking","reasoning":"secret chain of thought"}`)
	require.ErrorIs(t, c.Receive(context.Background(), bad), &Error{Code: CodeForbiddenField})
	require.Equal(t, CodeForbiddenField, w.next(t).Error.Code)
}

// BenchmarkDeltaAppend measures one delta appended to a stream that already
// holds n deltas: the cost must not grow with n (strings.Builder appends,
// and the draft handed to the target shares its bytes).
func BenchmarkDeltaAppend(b *testing.B) {
	piece := strings.Repeat("x", 16)
	for _, n := range []int{100, 10_000} {
		b.Run("after-"+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			var s *deltaStream
			seq := int64(0)
			reset := func() {
				s = &deltaStream{}
				for seq = 1; seq < int64(n); seq++ {
					s.apply(seq, piece, 1<<30, nil)
				}
			}
			reset()
			b.ResetTimer()
			for range b.N {
				if _, err := s.apply(seq, piece, 1<<30, nil); err != nil {
					b.Fatal(err)
				}
				_ = s.text()
				seq++
				if seq > int64(n)+1000 {
					b.StopTimer()
					reset()
					b.StartTimer()
				}
			}
		})
	}
}

// orderTarget records the order of activity and post calls.
type orderTarget struct {
	mu    sync.Mutex
	calls []string
	done  chan struct{}
}

func (o *orderTarget) PostMessage(context.Context, string, *ChatMessage) error {
	o.mu.Lock()
	o.calls = append(o.calls, "post")
	o.mu.Unlock()
	close(o.done)
	return nil
}

func (o *orderTarget) SetActivity(_ context.Context, _ string, a ChatActivity) error {
	o.mu.Lock()
	o.calls = append(o.calls, string(a.Status))
	o.mu.Unlock()
	return nil
}

func TestActivity_C6_ClearedBeforeFinalIsPosted(t *testing.T) {
	for range 20 {
		target := &orderTarget{done: make(chan struct{})}
		c, _, _ := newConnector(t, target, nil)
		require.NoError(t, c.Receive(context.Background(), activityPacket(t, ActivityThinking, "")))
		require.NoError(t, c.Receive(context.Background(), finalPacket(t, "a1", "x")))
		recv(t, target.done)
		target.mu.Lock()
		require.Equal(t, "post", target.calls[len(target.calls)-1], "calls %v", target.calls)
		require.Contains(t, target.calls, "idle")
		target.mu.Unlock()
	}
}
