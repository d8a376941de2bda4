package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
)

// crashLoopKills are the finals each run of the console shows before it is
// SIGKILLed: five kills while the burst is being posted, never after the
// last ack. The counts are fixed, so a run is repeatable up to scheduling.
var crashLoopKills = []int{97, 183, 141, 229, 163}

// crashLoopTotal is the number of finals sent.
const crashLoopTotal = 1000

// TestCrash_S8_CrashLoopNoFinalShownTwice: xAgent sends 1,000 finals as
// fast as the console takes them while the console (with -store) is
// SIGKILLed five times mid-burst and restarted on the same store; xAgent
// resends every unacked final until it gets a terminal ack. No final may be
// shown twice (S8: "whether or not delta state is restored after a
// restart, a final must never be sent twice"), and every final is either
// shown or reported to the sender as delivery_outcome_unknown: the few a
// kill caught between the claim and the completion record, whose post the
// console (stdout, no dedup, no way to ask) cannot confirm.
func TestCrash_S8_CrashLoopNoFinalShownTwice(t *testing.T) {
	store, addr := t.TempDir(), freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	var mu sync.Mutex
	delivered := map[string]imv2.AckStatus{}
	failed := map[string]imv2.Code{}
	allDone := make(chan struct{})
	terminal := func() {
		if len(delivered)+len(failed) == crashLoopTotal {
			close(allDone)
		}
	}
	p := start(t, "-addr", addr, "-store", store)
	client, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL:    p.url,
		Target: imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }),

		Options: &imv2.Options{
			Pending:    imv2.NewMemoryPendingStore(crashLoopTotal),
			AckTimeout: time.Second, RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
			OnDelivered: func(_ string, m imv2.ChatMessage, s imv2.AckStatus) {
				mu.Lock()
				defer mu.Unlock()
				delivered[m.MessageID] = s
				terminal()
			},
			OnFailed: func(_ string, m imv2.ChatMessage, e *imv2.Error) {
				mu.Lock()
				defer mu.Unlock()
				failed[m.MessageID] = e.Code
				terminal()
			},
		},
		Advanced: dataplane.ClientAdvanced{ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond},
	})
	require.NoError(t, err)
	defer client.Close()
	ch, err := client.OpenChannel(ctx, "")
	require.NoError(t, err)

	shown := map[string]int{} // message_id → finals printed, over every run
	count := func(e consolebridge.Event) bool {
		if e.Event != "final" {
			return false
		}
		shown[e.MessageID]++
		return true
	}
	// killAndDrain SIGKILLs the console and counts what it printed before
	// it died: the pipe holds every line written, and closes at its death.
	killAndDrain := func(p *proc) {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		for e := range p.events {
			count(e)
		}
		_ = p.cmd.Wait()
	}

	for i := range crashLoopTotal {
		_, err := client.Send(ctx, ch, imv2.ChatMessage{MessageID: fmt.Sprintf("final-%04d", i), Text: fmt.Sprintf("final number %d", i)})
		require.NoError(t, err)
	}
	for run, n := range crashLoopKills {
		for seen := 0; seen < n; {
			select {
			case e, ok := <-p.events:
				require.True(t, ok, "run %d: the console exited", run)
				if count(e) {
					seen++
				}
			case <-allDone:
				t.Fatalf("run %d: every final was terminal before the kill; the kills must come mid-burst", run)
			case <-ctx.Done():
				t.Fatalf("run %d: %d of %d finals shown before the deadline", run, seen, n)
			}
		}
		killAndDrain(p)
		p = start(t, "-addr", addr, "-store", store)
	}
	// The last run takes every resend until each final is terminal.
	for waiting := true; waiting; {
		select {
		case e, ok := <-p.events:
			require.True(t, ok, "last run: the console exited")
			count(e)
		case <-allDone:
			waiting = false
		case <-ctx.Done():
			mu.Lock()
			t.Fatalf("deadline: %d delivered, %d failed of %d", len(delivered), len(failed), crashLoopTotal)
		}
	}
	killAndDrain(p) // every shown final was printed before its ack

	mu.Lock()
	defer mu.Unlock()
	twice, once, unknown, unknownShown, lost := 0, 0, 0, 0, 0
	for i := range crashLoopTotal {
		id := fmt.Sprintf("final-%04d", i)
		n := shown[id]
		switch {
		case n > 1:
			twice++
			t.Errorf("%s shown %d times", id, n)
		case n == 1:
			once++
		}
		if code, ok := failed[id]; ok {
			require.Equal(t, imv2.CodeDeliveryOutcomeUnknown, code, "%s failed with an unexpected code", id)
			unknown++
			if n == 1 {
				unknownShown++
			}
			continue
		}
		if _, ok := delivered[id]; !ok {
			t.Errorf("%s never got a terminal ack", id)
			continue
		}
		if n == 0 {
			lost++
			t.Errorf("%s acked delivered but never shown", id)
		}
	}
	t.Logf("crash loop: %d finals, %d SIGKILLs: shown once %d, shown twice %d, reported delivery_outcome_unknown %d (%d of them shown, %d not), shown or reported %d",
		crashLoopTotal, len(crashLoopKills), once, twice, unknown, unknownShown, unknown-unknownShown, once+twice+unknown-unknownShown)
	require.Zero(t, twice, "S8: a final shown twice across a crash")
	require.Zero(t, lost)
	require.Equal(t, crashLoopTotal, once+unknown-unknownShown, "every final is shown or reported unknown")
}
