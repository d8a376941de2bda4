package xmppbridge

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestQueue_NoMessageLostOrReordered drives a reader's queue with random
// interleavings of the stream (messages of three senders, and the bot's
// own, each archived first), of the reader taking messages (slowly:
// xAgent acking rarely) and of catch-ups reading random page sizes from
// the archive, the stream going on while a page travels. Whatever the interleaving: every person's message is
// handed over (at least once: the kit drops a repeat by its ID), none of
// the bot's own, each sender's in archive order, and the queue never
// holds more than its bound and one page.
func TestQueue_NoMessageLostOrReordered(t *testing.T) {
	var gaps, runs atomic.Int64
	defer func() {
		t.Logf("runs with a catch-up: %d of %d", gaps.Load(), runs.Load())
		require.Positive(t, gaps.Load(), "no run reached the archive")
	}()
	rapid.Check(t, func(t *rapid.T) {
		runs.Add(1)
		q := newQueue()
		gapped := false
		var archive []incoming
		var handed []incoming
		senders := []string{"a", "b", "c"}
		arrive := func(skip bool) {
			id := fmt.Sprintf("a%05d", len(archive))
			in := incoming{id: "sid:" + id, arch: id, from: senders[rapid.IntRange(0, 2).Draw(t, "sender")], skip: skip}
			archive = append(archive, in)
			if !skip {
				q.add(in) // the handler never hands the bot's own to add
			}
		}
		scan := func() bool {
			after, due := q.scanDue()
			if !due {
				return false
			}
			i := 0
			for i < len(archive) && archive[i].arch != after {
				i++
			}
			require.Less(t, i, len(archive), "the scan's position is an archive ID")
			rest := archive[i+1:]
			n := min(len(rest), rapid.IntRange(1, archivePage).Draw(t, "page"))
			page, complete := rest[:n], n == len(rest)
			// The stream goes on while the answer travels: messages
			// archived after the page reach add before scanned.
			for range rapid.IntRange(0, 3).Draw(t, "meanwhile") {
				arrive(false)
			}
			q.scanned(page, complete)
			return true
		}
		pop := func() bool {
			in, ok := q.next()
			if ok {
				handed = append(handed, in)
			}
			return ok
		}
		// A slow reader: it takes one message per takeEvery arrivals, so
		// the shares fill and the catch-up runs.
		takeEvery := rapid.IntRange(2, 40).Draw(t, "takeEvery")
		steps := rapid.IntRange(100, 600).Draw(t, "steps")
		for i := range steps {
			switch rapid.IntRange(0, 19).Draw(t, "action") {
			case 0:
				scan()
			case 1:
				if rapid.IntRange(0, 20).Draw(t, "drain") == 0 {
					for pop() {
					}
				}
			default: // a burst: one sender floods, or several talk
				for range rapid.IntRange(1, 8).Draw(t, "burst") {
					arrive(rapid.IntRange(0, 9).Draw(t, "own") == 0)
				}
			}
			if i%takeEvery == 0 {
				pop()
			}
			q.mu.Lock()
			gapped = gapped || q.scanning
			q.mu.Unlock()
			q.mu.Lock()
			total := q.total
			q.mu.Unlock()
			require.LessOrEqual(t, total, readerQueue+archivePage)
		}
		for i := 0; pop() || scan(); i++ {
			require.Less(t, i, 100000, "the queue never drains")
		}
		if gapped {
			gaps.Add(1)
		}
		first := map[string]int{}
		for i, in := range handed {
			require.False(t, in.skip, "the bot's own message %s handed over", in.arch)
			if _, ok := first[in.arch]; !ok {
				first[in.arch] = i
			}
		}
		last := map[string]string{}
		for _, in := range archive {
			if in.skip {
				continue
			}
			_, ok := first[in.arch]
			require.True(t, ok, "message %s of %s lost", in.arch, in.from)
			if prev := last[in.from]; prev != "" {
				require.Less(t, first[prev], first[in.arch], "%s's %s handed over before %s", in.from, in.arch, prev)
			}
			last[in.from] = in.arch
		}
	})
}
