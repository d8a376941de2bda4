// Package storetest is a contract test suite for implementations of
// imv2.PendingStore and imv2.CompletedStore (and, in the files named
// after them, imv2.ClaimStore, state.ResultStore, state.BindingStore and
// the xAgent side's state.ChannelStore). A store passes when it behaves
// like the in-memory stores of packages imv2 and state, which run the
// same suite:
//
//	func TestMyPendingStore(t *testing.T) {
//		storetest.TestPendingStore(t, func(t *testing.T, capacity int) imv2.PendingStore {
//			s := mystore.New(capacity)
//			t.Cleanup(func() { s.Close() })
//			return s
//		}, nil)
//	}
//
// A durable store also passes a reopener, which closes a store and opens the
// same data again the way a process restart would; the suite then checks that
// nothing recorded was lost (S1, S8).
//
// What the suite pins down beyond the interface comments:
//   - "Oldest first" is the order of Add, even when two entries carry the
//     same Created time.
//   - A re-Add of a pending message_id with the same content keeps the first
//     entry (its Created and Message.CreatedAt too) and its place in line;
//     it succeeds even when the channel is full.
//   - Created survives as the same instant (time.Time.Equal); its location
//     and monotonic reading need not.
//   - A completed record is visible while now < recorded+ttl, so it is gone
//     at exactly ttl. Re-recording a message restarts its ttl and moves it to
//     the back of the eviction order.
//   - Records are evicted oldest first, in Record order, across all channels,
//     except that a channel holding no more than its share of the capacity
//     (capacity over the channels holding records) keeps its records
//     younger than the resend horizon (imv2's default PendingTTL, 1 h):
//     room is made from channels over their share, the recording one's
//     first, so one peer's flood cannot make another's final show twice.
//
// Time is a fakeclock; the suite never sleeps.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
)

// PendingFactory returns a new, empty store that holds at most capacity
// entries per channel. It registers its own cleanup with t.Cleanup.
type PendingFactory func(t *testing.T, capacity int) imv2.PendingStore

// PendingReopener closes s, a store made by the factory (or by an earlier
// reopen), and returns a store on the same data, opened anew with the same
// settings, as after a process restart. It registers its own cleanup.
type PendingReopener func(t *testing.T, s imv2.PendingStore) imv2.PendingStore

// CompletedFactory returns a new, empty store holding at most capacity
// records across all channels, each for ttl, timed by clock. It registers
// its own cleanup with t.Cleanup.
type CompletedFactory func(t *testing.T, capacity int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore

// CompletedReopener closes s and returns a store on the same data, opened
// anew with the same capacity, ttl and clock, as after a process restart.
type CompletedReopener func(t *testing.T, s imv2.CompletedStore) imv2.CompletedStore

// PairFactory returns the sender's pending store and the receiver's
// completed store the way one process would hold both: two separate stores,
// or two views of one durable file.
type PairFactory func(t *testing.T) (imv2.PendingStore, imv2.CompletedStore)

// start is the time the suite's fake clocks start at.
var start = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)

// TestPendingStore runs the PendingStore contract (S1, S3) against stores
// made by newStore. reopen may be nil for a store that is not durable.
func TestPendingStore(t *testing.T, newStore PendingFactory, reopen PendingReopener) {
	t.Run("S1_AddListRemove", func(t *testing.T) { pendingAddListRemove(t, newStore) })
	t.Run("S1_OrderIsAddOrder", func(t *testing.T) { pendingOrder(t, newStore) })
	t.Run("S1_ListIsFullContent", func(t *testing.T) { pendingFullContent(t, newStore) })
	t.Run("S2_ReAddSameContentIsNoop", func(t *testing.T) { pendingReAddSame(t, newStore) })
	t.Run("S6_ReAddOtherContentConflicts", func(t *testing.T) { pendingReAddOther(t, newStore) })
	t.Run("S1_CapPerChannel", func(t *testing.T) { pendingCap(t, newStore) })
	t.Run("S1_ChannelsIndependent", func(t *testing.T) { pendingChannels(t, newStore) })
	t.Run("Concurrent", func(t *testing.T) { pendingConcurrent(t, newStore) })
	if reopen != nil {
		t.Run("S1_S8_Reopen", func(t *testing.T) { pendingReopen(t, newStore, reopen) })
	}
}

// TestCompletedStore runs the CompletedStore contract (S6, S7) against
// stores made by newStore. reopen may be nil for a store that is not durable.
func TestCompletedStore(t *testing.T, newStore CompletedFactory, reopen CompletedReopener) {
	t.Run("S6_LookupAfterRecord", func(t *testing.T) { completedLookup(t, newStore) })
	t.Run("S6_FingerprintExact", func(t *testing.T) { completedFingerprint(t, newStore) })
	t.Run("S4_TTL", func(t *testing.T) { completedTTL(t, newStore) })
	t.Run("S4_ReRecordRestartsTTL", func(t *testing.T) { completedReRecordTTL(t, newStore) })
	t.Run("S4_CapEvictsOldestFirst", func(t *testing.T) { completedCap(t, newStore) })
	t.Run("S6_FloodKeepsAnotherChannelsRecord", func(t *testing.T) { completedShares(t, newStore) })
	t.Run("S7_DropChannel", func(t *testing.T) { completedDropChannel(t, newStore) })
	t.Run("S6_Handover", func(t *testing.T) { completedHandover(t, newStore) })
	t.Run("S4_HandoverRepeatChangesNothing", func(t *testing.T) { completedHandoverRepeat(t, newStore) })
	t.Run("S4_HandoverCopiesAtMostTheNewest", func(t *testing.T) { completedHandoverCap(t, newStore) })
	t.Run("Concurrent", func(t *testing.T) { completedConcurrent(t, newStore) })
	if reopen != nil {
		t.Run("S8_Reopen", func(t *testing.T) { completedReopen(t, newStore, reopen) })
	}
}

// TestIndependent checks S9 on a pending and a completed store held by one
// process: removing a pending message leaves its completed record, and
// dropping completed records leaves pending entries.
func TestIndependent(t *testing.T, newStores PairFactory) {
	ctx := context.Background()
	p, c := newStores(t)
	m := entry("ch", "m1", start, "hello")
	other := entry("ch", "m2", start, "still pending")
	mustAdd(t, p, m)
	mustAdd(t, p, other)
	fp := imv2.FingerprintOf(&m.Message)
	mustRecord(t, c, "ch", "m1", fp)

	// The sender's terminal ack removes its pending entry; the receiver's
	// record of the same message_id must stay.
	if err := p.Remove(ctx, "ch", "m1"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	wantLookup(t, c, "ch", "m1", fp, true)

	// Completed records come and go without touching pending entries.
	mustRecord(t, c, "ch", "m2", imv2.FingerprintOf(&other.Message))
	if err := c.DropChannel(ctx, "ch"); err != nil {
		t.Fatalf("DropChannel: %v", err)
	}
	wantLookup(t, c, "ch", "m1", imv2.Fingerprint{}, false)
	wantList(t, p, "ch", other)
}

// entry returns a pending entry of channel ch carrying message id with the
// given text, created at created. Extra files are attached in order.
func entry(ch, id string, created time.Time, text string, files ...imv2.File) imv2.PendingEntry {
	return imv2.PendingEntry{
		ChannelID: ch,
		Message:   imv2.ChatMessage{MessageID: id, Text: text, Files: files},
		Created:   created,
	}
}

// fpOf returns a fingerprint distinct for each distinct s.
func fpOf(s string) imv2.Fingerprint {
	m := imv2.ChatMessage{Text: s}
	return imv2.FingerprintOf(&m)
}

func pendingAddListRemove(t *testing.T, newStore PendingFactory) {
	ctx := context.Background()
	s := newStore(t, 10)
	wantList(t, s, "ch") // empty store
	a := entry("ch", "a", start, "first")
	b := entry("ch", "b", start.Add(time.Second), "second")
	c := entry("ch", "c", start.Add(2*time.Second), "third")
	for _, e := range []imv2.PendingEntry{a, b, c} {
		mustAdd(t, s, e)
	}
	wantList(t, s, "ch", a, b, c)

	if err := s.Remove(ctx, "ch", "b"); err != nil {
		t.Fatalf("Remove(b): %v", err)
	}
	wantList(t, s, "ch", a, c)
	// Removing what is not there is no error and changes nothing.
	for _, k := range [][2]string{{"ch", "b"}, {"ch", "zz"}, {"other", "a"}} {
		if err := s.Remove(ctx, k[0], k[1]); err != nil {
			t.Fatalf("Remove(%q, %q) of a missing entry: %v", k[0], k[1], err)
		}
	}
	wantList(t, s, "ch", a, c)
	// A removed message_id may be added again; it goes to the back.
	mustAdd(t, s, b)
	wantList(t, s, "ch", a, c, b)
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Remove(ctx, "ch", id); err != nil {
			t.Fatalf("Remove(%s): %v", id, err)
		}
	}
	wantList(t, s, "ch")
}

func pendingOrder(t *testing.T, newStore PendingFactory) {
	s := newStore(t, 10)
	// Same Created time and IDs out of lexical order: only Add order counts.
	var want []imv2.PendingEntry
	for _, id := range []string{"m3", "m1", "m10", "m2", "a"} {
		e := entry("ch", id, start, "text of "+id)
		mustAdd(t, s, e)
		want = append(want, e)
	}
	wantList(t, s, "ch", want...)
}

// richEntries are entries whose every field is set or deliberately empty;
// List must give each back unchanged.
func richEntries(ch string) []imv2.PendingEntry {
	files := []imv2.File{
		{Type: imv2.FileImage, FileRef: "ref-1", Filename: "cat.png", MimeType: "image/png",
			ByteSize: 123456, ExpiresAt: 1_900_000_000_000, DownloadURL: "https://cdn.example/x?sig=1"},
		{Type: imv2.FileFile, FileRef: "ref-2"}, // optional fields empty
		{Type: imv2.FileAudio, FileRef: "ref-3", Filename: "v.ogg", DownloadURL: "/files/refs/ref-3"},
	}
	many := make([]imv2.File, imv2.MaxFilesPerMessage)
	for i := range many {
		many[i] = imv2.File{Type: imv2.FileVideo, FileRef: fmt.Sprintf("v%02d", i), ByteSize: int64(i) << 40}
	}
	e := func(id string, created time.Time, m imv2.ChatMessage) imv2.PendingEntry {
		m.MessageID = id
		return imv2.PendingEntry{ChannelID: ch, Message: m, Created: created}
	}
	return []imv2.PendingEntry{
		e("text-only", start, imv2.ChatMessage{Text: "héllo 👋 with a \x00 NUL and\nnewline"}),
		e("files-only", start.Add(time.Nanosecond), imv2.ChatMessage{Files: files}),
		e("both", start.Add(time.Hour), imv2.ChatMessage{Text: "see attached", Files: files[:1], CreatedAt: 1_893_553_445_000}),
		e("big", start.Add(-time.Hour), imv2.ChatMessage{Text: strings.Repeat("0123456789abcdef", 4096), Files: many}),
		e(strings.Repeat("x", imv2.MaxIDBytes), time.Unix(0, 0), imv2.ChatMessage{Text: "longest message_id"}),
		e("zero-created", time.Time{}, imv2.ChatMessage{Text: "no Created"}),
	}
}

func pendingFullContent(t *testing.T, newStore PendingFactory) {
	s := newStore(t, 10)
	want := richEntries("ch")
	for _, e := range want {
		mustAdd(t, s, e)
	}
	wantList(t, s, "ch", want...)
}

func pendingReAddSame(t *testing.T, newStore PendingFactory) {
	s := newStore(t, 2)
	a := entry("ch", "a", start, "hello", imv2.File{Type: imv2.FileImage, FileRef: "r"})
	b := entry("ch", "b", start.Add(time.Second), "world")
	mustAdd(t, s, a)
	mustAdd(t, s, b)
	// A resend stamps new times but is the same message (fingerprint
	// equal): the first entry stays as it was, in its place, and a full
	// channel does not refuse it.
	again := a
	again.Created = start.Add(time.Minute)
	again.Message.CreatedAt = 42
	mustAdd(t, s, again)
	mustAdd(t, s, a)
	wantList(t, s, "ch", a, b)
}

func pendingReAddOther(t *testing.T, newStore PendingFactory) {
	ctx := context.Background()
	base := entry("ch", "a", start, "hello", imv2.File{Type: imv2.FileImage, FileRef: "r", Filename: "a.png"})
	variants := map[string]func(e *imv2.PendingEntry){
		"text":       func(e *imv2.PendingEntry) { e.Message.Text = "hello!" },
		"file field": func(e *imv2.PendingEntry) { e.Message.Files[0].Filename = "b.png" },
		"file added": func(e *imv2.PendingEntry) {
			e.Message.Files = append(e.Message.Files, imv2.File{Type: imv2.FileFile, FileRef: "s"})
		},
		"files dropped": func(e *imv2.PendingEntry) { e.Message.Files = nil },
	}
	for name, change := range variants {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, 10)
			mustAdd(t, s, base)
			other := base
			other.Message.Files = append([]imv2.File(nil), base.Message.Files...)
			change(&other)
			err := s.Add(ctx, other)
			wantCode(t, err, imv2.CodeMessageIDConflict)
			wantList(t, s, "ch", base)
		})
	}
}

func pendingCap(t *testing.T, newStore PendingFactory) {
	ctx := context.Background()
	s := newStore(t, 3)
	var want []imv2.PendingEntry
	for i := range 3 {
		e := entry("ch", fmt.Sprintf("m%d", i), start.Add(time.Duration(i)*time.Second), "x")
		mustAdd(t, s, e)
		want = append(want, e)
	}
	over := entry("ch", "m3", start.Add(time.Hour), "over")
	wantCode(t, s.Add(ctx, over), imv2.CodePendingFull)
	wantList(t, s, "ch", want...) // nothing dropped to make room

	// The cap is per channel.
	var others []imv2.PendingEntry
	for i := range 3 {
		e := entry("other", fmt.Sprintf("m%d", i), start, "y")
		mustAdd(t, s, e)
		others = append(others, e)
	}
	wantList(t, s, "other", others...)

	// Removing one makes room for exactly one.
	if err := s.Remove(ctx, "ch", "m1"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	mustAdd(t, s, over)
	wantList(t, s, "ch", want[0], want[2], over)
	wantCode(t, s.Add(ctx, entry("ch", "m4", start, "z")), imv2.CodePendingFull)
}

func pendingChannels(t *testing.T, newStore PendingFactory) {
	ctx := context.Background()
	s := newStore(t, 10)
	// Channel IDs where one is a prefix of another, and one message_id in
	// several channels with different content: no conflict across channels.
	chans := []string{"a", "ab", "a-b", "b"}
	for _, ch := range chans {
		mustAdd(t, s, entry(ch, "same-id", start, "content of "+ch))
		mustAdd(t, s, entry(ch, "own-"+ch, start, "own"))
	}
	if err := s.Remove(ctx, "a", "same-id"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	wantList(t, s, "a", entry("a", "own-a", start, "own"))
	for _, ch := range chans[1:] {
		wantList(t, s, ch, entry(ch, "same-id", start, "content of "+ch), entry(ch, "own-"+ch, start, "own"))
	}
}

func pendingConcurrent(t *testing.T, newStore PendingFactory) {
	ctx := context.Background()
	s := newStore(t, 100)
	const workers, each = 4, 10
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			ch := fmt.Sprintf("ch%d", w%2)
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				if err := s.Add(ctx, entry(ch, id, start, id)); err != nil {
					errs <- err
					return
				}
				if _, err := s.List(ctx, ch); err != nil {
					errs <- err
					return
				}
				if i%2 == 1 {
					if err := s.Remove(ctx, ch, id); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent use: %v", err)
		}
	}
	for _, ch := range []string{"ch0", "ch1"} {
		l, err := s.List(ctx, ch)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(l) != workers/2*each/2 {
			t.Fatalf("List(%s) has %d entries, want %d", ch, len(l), workers/2*each/2)
		}
	}
}

func pendingReopen(t *testing.T, newStore PendingFactory, reopen PendingReopener) {
	ctx := context.Background()
	s := newStore(t, 8)
	rich := richEntries("ch")
	for _, e := range rich {
		mustAdd(t, s, e)
	}
	other := entry("other", "o1", start, "other channel")
	mustAdd(t, s, other)
	if err := s.Remove(ctx, "ch", rich[1].Message.MessageID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	want := append(append([]imv2.PendingEntry(nil), rich[:1]...), rich[2:]...)

	s = reopen(t, s)
	wantList(t, s, "ch", want...)
	wantList(t, s, "other", other)

	// Dedup, conflicts, order and the cap still hold after the restart.
	mustAdd(t, s, rich[0])
	changed := rich[0]
	changed.Message.Text += "!"
	wantCode(t, s.Add(ctx, changed), imv2.CodeMessageIDConflict)
	late := entry("ch", "late", start, "after reopen")
	mustAdd(t, s, late) // 6 of the cap of 8
	mustAdd(t, s, rich[1])
	want = append(want, late, rich[1])
	mustAdd(t, s, entry("ch", "eighth", start, "8"))
	want = append(want, entry("ch", "eighth", start, "8"))
	wantCode(t, s.Add(ctx, entry("ch", "ninth", start, "9")), imv2.CodePendingFull)

	s = reopen(t, s)
	wantList(t, s, "ch", want...)
	wantCode(t, s.Add(ctx, entry("ch", "ninth", start, "9")), imv2.CodePendingFull)
	for _, e := range want {
		if err := s.Remove(ctx, "ch", e.Message.MessageID); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	s = reopen(t, s)
	wantList(t, s, "ch")
	wantList(t, s, "other", other)
}

func completedLookup(t *testing.T, newStore CompletedFactory) {
	clock := fakeclock.New(start)
	s := newStore(t, 10, time.Hour, clock)
	wantLookup(t, s, "ch", "m1", imv2.Fingerprint{}, false)
	mustRecord(t, s, "ch", "m1", fpOf("one"))
	wantLookup(t, s, "ch", "m1", fpOf("one"), true)
	// Another channel or another message_id is another record.
	wantLookup(t, s, "other", "m1", imv2.Fingerprint{}, false)
	wantLookup(t, s, "ch", "m2", imv2.Fingerprint{}, false)
	wantLookup(t, s, "ch", "m", imv2.Fingerprint{}, false)
	wantLookup(t, s, "c", "hm1", imv2.Fingerprint{}, false)
	long := strings.Repeat("y", imv2.MaxIDBytes)
	mustRecord(t, s, long, long, fpOf("long"))
	wantLookup(t, s, long, long, fpOf("long"), true)
}

func completedFingerprint(t *testing.T, newStore CompletedFactory) {
	clock := fakeclock.New(start)
	s := newStore(t, 10, time.Hour, clock)
	var zero imv2.Fingerprint
	var ones imv2.Fingerprint
	for i := range ones {
		ones[i] = 0xff
	}
	fps := map[string]imv2.Fingerprint{"a": fpOf("a"), "b": fpOf("b"), "zero": zero, "ones": ones}
	for id, fp := range fps {
		mustRecord(t, s, "ch", id, fp)
	}
	for id, fp := range fps {
		wantLookup(t, s, "ch", id, fp, true)
	}
	// Recording again with another fingerprint replaces it.
	mustRecord(t, s, "ch", "a", fpOf("a2"))
	wantLookup(t, s, "ch", "a", fpOf("a2"), true)
}

func completedTTL(t *testing.T, newStore CompletedFactory) {
	clock := fakeclock.New(start)
	s := newStore(t, 10, time.Hour, clock)
	mustRecord(t, s, "ch", "early", fpOf("early"))
	clock.Advance(30 * time.Minute)
	mustRecord(t, s, "ch", "late", fpOf("late"))
	clock.Advance(30*time.Minute - time.Millisecond)
	wantLookup(t, s, "ch", "early", fpOf("early"), true)
	clock.Advance(time.Millisecond) // early is exactly one TTL old
	wantLookup(t, s, "ch", "early", imv2.Fingerprint{}, false)
	wantLookup(t, s, "ch", "late", fpOf("late"), true)
	mustRecord(t, s, "ch", "new", fpOf("new")) // a Record may sweep
	wantLookup(t, s, "ch", "early", imv2.Fingerprint{}, false)
	wantLookup(t, s, "ch", "late", fpOf("late"), true)
	clock.Advance(30 * time.Minute)
	wantLookup(t, s, "ch", "late", imv2.Fingerprint{}, false)
	wantLookup(t, s, "ch", "new", fpOf("new"), true)
	// An expired message_id can be recorded afresh.
	mustRecord(t, s, "ch", "early", fpOf("early2"))
	wantLookup(t, s, "ch", "early", fpOf("early2"), true)
}

func completedReRecordTTL(t *testing.T, newStore CompletedFactory) {
	clock := fakeclock.New(start)
	s := newStore(t, 10, time.Hour, clock)
	mustRecord(t, s, "ch", "m", fpOf("m"))
	clock.Advance(45 * time.Minute)
	mustRecord(t, s, "ch", "m", fpOf("m"))
	clock.Advance(45 * time.Minute)
	wantLookup(t, s, "ch", "m", fpOf("m"), true)
	clock.Advance(15 * time.Minute)
	wantLookup(t, s, "ch", "m", imv2.Fingerprint{}, false)
}

func completedCap(t *testing.T, newStore CompletedFactory) {
	clock := fakeclock.New(start)
	s := newStore(t, 3, time.Hour, clock)
	// Same instant, IDs out of lexical order, two channels: only Record
	// order counts, across channels.
	mustRecord(t, s, "x", "m3", fpOf("1"))
	mustRecord(t, s, "y", "m1", fpOf("2"))
	mustRecord(t, s, "x", "m2", fpOf("3"))
	mustRecord(t, s, "y", "m0", fpOf("4"))
	wantLookup(t, s, "x", "m3", imv2.Fingerprint{}, false)
	wantLookup(t, s, "y", "m1", fpOf("2"), true)
	wantLookup(t, s, "x", "m2", fpOf("3"), true)
	wantLookup(t, s, "y", "m0", fpOf("4"), true)
	// Re-recording moves a record to the back: y/m1 outlives x/m2 now.
	mustRecord(t, s, "y", "m1", fpOf("2"))
	clock.Advance(time.Second)
	mustRecord(t, s, "x", "m9", fpOf("5"))
	wantLookup(t, s, "x", "m2", imv2.Fingerprint{}, false)
	wantLookup(t, s, "y", "m0", fpOf("4"), true)
	wantLookup(t, s, "y", "m1", fpOf("2"), true)
	wantLookup(t, s, "x", "m9", fpOf("5"), true)
}

// completedShares: one channel, then five round robin, record three
// times the capacity after another channel's one record; that record,
// young and within its channel's share, stays, and the flood keeps its
// newest records. Past the resend horizon (1 h, under a 24 h TTL) the
// record is no longer protected and goes oldest first.
func completedShares(t *testing.T, newStore CompletedFactory) {
	for _, floods := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d flooding channels", floods), func(t *testing.T) {
			clock := fakeclock.New(start)
			const capacity = 10
			s := newStore(t, capacity, 24*time.Hour, clock)
			mustRecord(t, s, "victim", "v1", fpOf("v1"))
			clock.Advance(time.Second)
			n := 3 * capacity
			for i := range n {
				mustRecord(t, s, fmt.Sprintf("flood%d", i%floods), fmt.Sprintf("f%d", i), fpOf("f"))
			}
			wantLookup(t, s, "victim", "v1", fpOf("v1"), true)
			wantLookup(t, s, fmt.Sprintf("flood%d", (n-1)%floods), fmt.Sprintf("f%d", n-1), fpOf("f"), true)
			held := 0
			for i := range n {
				if _, ok, _ := s.Lookup(context.Background(), fmt.Sprintf("flood%d", i%floods), fmt.Sprintf("f%d", i)); ok {
					held++
				}
			}
			if held != capacity-1 {
				t.Fatalf("the flood holds %d records, want the capacity less the victim's, %d", held, capacity-1)
			}

			clock.Advance(time.Hour) // past the resend horizon
			for i := range capacity {
				mustRecord(t, s, "late", fmt.Sprintf("l%d", i), fpOf("l"))
			}
			wantLookup(t, s, "victim", "v1", imv2.Fingerprint{}, false)
		})
	}
}

// completedHandover: a handover copies the live records of one channel to
// another with their age, keeps the source's, and copies nothing from an
// unknown channel.
func completedHandover(t *testing.T, newStore CompletedFactory) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	s := newStore(t, 20, time.Hour, clock)
	mustRecord(t, s, "a", "m1", fpOf("a1"))
	mustRecord(t, s, "a", "m2", fpOf("a2"))
	mustRecord(t, s, "ab", "m3", fpOf("ab3")) // a longer channel ID sharing a's prefix
	mustRecord(t, s, "b", "m2", fpOf("b2"))   // replaced by a's record
	clock.Advance(30 * time.Minute)
	if err := s.Handover(ctx, "a", "b"); err != nil {
		t.Fatalf("Handover: %v", err)
	}
	if err := s.Handover(ctx, "never-seen", "c"); err != nil {
		t.Fatalf("Handover from an unknown channel: %v", err)
	}
	wantLookup(t, s, "b", "m1", fpOf("a1"), true)
	wantLookup(t, s, "b", "m2", fpOf("a2"), true)
	wantLookup(t, s, "b", "m3", imv2.Fingerprint{}, false)
	wantLookup(t, s, "a", "m1", fpOf("a1"), true)
	wantLookup(t, s, "c", "m1", imv2.Fingerprint{}, false)
	// A copy keeps the record's age: it expires when the original does.
	clock.Advance(31 * time.Minute)
	wantLookup(t, s, "b", "m1", imv2.Fingerprint{}, false)
	wantLookup(t, s, "a", "m1", imv2.Fingerprint{}, false)
}

// completedHandoverRepeat: repeating a handover adds no copy and moves
// none towards the back of the eviction order, so a peer reopening one
// channel again and again cannot make other channels' records go first.
func completedHandoverRepeat(t *testing.T, newStore CompletedFactory) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	s := newStore(t, 11, 4*time.Hour, clock)
	for i := range 5 {
		mustRecord(t, s, "a", fmt.Sprintf("m%d", i), fpOf("a"))
	}
	if err := s.Handover(ctx, "a", "b"); err != nil {
		t.Fatalf("Handover: %v", err)
	}
	mustRecord(t, s, "other", "x1", fpOf("x1")) // the store is full now
	for range 3 {
		if err := s.Handover(ctx, "a", "b"); err != nil {
			t.Fatalf("Handover again: %v", err)
		}
	}
	// Ten new records push out the ten oldest: a's and b's copies, which
	// came before x1. (Past the resend horizon, an hour: the memory store
	// protects younger records of a channel within its share.)
	clock.Advance(2 * time.Hour)
	for i := range 10 {
		mustRecord(t, s, "new", fmt.Sprintf("n%d", i), fpOf("n"))
	}
	wantLookup(t, s, "other", "x1", fpOf("x1"), true)
	wantLookup(t, s, "b", "m4", imv2.Fingerprint{}, false)
}

// completedHandoverCap: one handover copies at most MaxHandoverRecords
// records, the newest.
func completedHandoverCap(t *testing.T, newStore CompletedFactory) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	const extra = 3
	n := imv2.MaxHandoverRecords + extra
	s := newStore(t, 2*n+1, time.Hour, clock)
	for i := range n {
		mustRecord(t, s, "a", fmt.Sprintf("m%d", i), fpOf("a"))
		clock.Advance(time.Millisecond)
	}
	if err := s.Handover(ctx, "a", "b"); err != nil {
		t.Fatalf("Handover: %v", err)
	}
	for i := range n {
		wantLookup(t, s, "b", fmt.Sprintf("m%d", i), fpOf("a"), i >= extra)
	}
}

func completedDropChannel(t *testing.T, newStore CompletedFactory) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	s := newStore(t, 20, time.Hour, clock)
	chans := []string{"a", "ab", "a-b", "b"}
	for _, ch := range chans {
		for _, id := range []string{"m1", "m2", "m3"} {
			mustRecord(t, s, ch, id, fpOf(ch+id))
		}
	}
	if err := s.DropChannel(ctx, "a"); err != nil {
		t.Fatalf("DropChannel: %v", err)
	}
	if err := s.DropChannel(ctx, "never-seen"); err != nil {
		t.Fatalf("DropChannel of an unknown channel: %v", err)
	}
	for _, ch := range chans {
		for _, id := range []string{"m1", "m2", "m3"} {
			if ch == "a" {
				wantLookup(t, s, ch, id, imv2.Fingerprint{}, false)
			} else {
				wantLookup(t, s, ch, id, fpOf(ch+id), true)
			}
		}
	}
	// The channel may be used again afterwards.
	mustRecord(t, s, "a", "m1", fpOf("again"))
	wantLookup(t, s, "a", "m1", fpOf("again"), true)
}

func completedConcurrent(t *testing.T, newStore CompletedFactory) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	s := newStore(t, 1000, time.Hour, clock)
	const workers, each = 4, 10
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			ch := fmt.Sprintf("ch%d", w)
			for i := range each {
				id := fmt.Sprintf("m%d", i)
				if err := s.Record(ctx, ch, id, fpOf(ch+id)); err != nil {
					errs <- err
					return
				}
				fp, ok, err := s.Lookup(ctx, ch, id)
				if err != nil || !ok || fp != fpOf(ch+id) {
					errs <- fmt.Errorf("Lookup(%s, %s) = %x, %v, %v", ch, id, fp[:4], ok, err)
					return
				}
			}
			if w == 0 {
				errs <- s.DropChannel(ctx, ch)
				return
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent use: %v", err)
		}
	}
	wantLookup(t, s, "ch0", "m0", imv2.Fingerprint{}, false)
	wantLookup(t, s, "ch3", "m9", fpOf("ch3m9"), true)
}

func completedReopen(t *testing.T, newStore CompletedFactory, reopen CompletedReopener) {
	clock := fakeclock.New(start)
	s := newStore(t, 4, 3*time.Hour, clock)
	mustRecord(t, s, "x", "m1", fpOf("1"))
	clock.Advance(30 * time.Minute)
	mustRecord(t, s, "y", "m2", fpOf("2"))
	mustRecord(t, s, "x", "m3", fpOf("3"))
	mustRecord(t, s, "a", "m4", fpOf("4"))
	if err := s.DropChannel(context.Background(), "a"); err != nil {
		t.Fatalf("DropChannel: %v", err)
	}

	s = reopen(t, s)
	wantLookup(t, s, "x", "m1", fpOf("1"), true)
	wantLookup(t, s, "y", "m2", fpOf("2"), true)
	wantLookup(t, s, "x", "m3", fpOf("3"), true)
	wantLookup(t, s, "a", "m4", imv2.Fingerprint{}, false)

	// The cap and the eviction order survive: 3 held, cap 4; two more
	// records evict the oldest one, x/m1. (Past the resend horizon, an
	// hour: the memory store protects younger records of a channel within
	// its share.)
	clock.Advance(90 * time.Minute)
	mustRecord(t, s, "y", "m5", fpOf("5"))
	mustRecord(t, s, "y", "m6", fpOf("6"))
	wantLookup(t, s, "x", "m1", imv2.Fingerprint{}, false)
	wantLookup(t, s, "y", "m2", fpOf("2"), true)

	// Record times survive: y/m2 and x/m3 expire one TTL after they were
	// recorded (start+30m), not one TTL after a reopen.
	s = reopen(t, s)
	clock.Advance(90 * time.Minute)
	wantLookup(t, s, "y", "m2", imv2.Fingerprint{}, false)
	wantLookup(t, s, "x", "m3", imv2.Fingerprint{}, false)
	wantLookup(t, s, "y", "m5", fpOf("5"), true)
	wantLookup(t, s, "y", "m6", fpOf("6"), true)
}

func mustAdd(t *testing.T, s imv2.PendingStore, e imv2.PendingEntry) {
	t.Helper()
	if err := s.Add(context.Background(), e); err != nil {
		t.Fatalf("Add(%s/%.20s): %v", e.ChannelID, e.Message.MessageID, err)
	}
}

func mustRecord(t *testing.T, s imv2.CompletedStore, ch, id string, fp imv2.Fingerprint) {
	t.Helper()
	if err := s.Record(context.Background(), ch, id, fp); err != nil {
		t.Fatalf("Record(%.20s/%.20s): %v", ch, id, err)
	}
}

func wantLookup(t *testing.T, s imv2.CompletedStore, ch, id string, wantFP imv2.Fingerprint, wantOK bool) {
	t.Helper()
	fp, ok, err := s.Lookup(context.Background(), ch, id)
	if err != nil {
		t.Fatalf("Lookup(%.20s/%.20s): %v", ch, id, err)
	}
	if ok != wantOK {
		t.Fatalf("Lookup(%.20s/%.20s) found=%v, want %v", ch, id, ok, wantOK)
	}
	if ok && fp != wantFP {
		t.Fatalf("Lookup(%.20s/%.20s) fingerprint %x, want %x", ch, id, fp, wantFP)
	}
}

func wantList(t *testing.T, s imv2.PendingStore, ch string, want ...imv2.PendingEntry) {
	t.Helper()
	got, err := s.List(context.Background(), ch)
	if err != nil {
		t.Fatalf("List(%s): %v", ch, err)
	}
	if len(got) != len(want) {
		t.Fatalf("List(%s) has %d entries %v, want %d %v", ch, len(got), ids(got), len(want), ids(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ChannelID != w.ChannelID || !g.Created.Equal(w.Created) || !reflect.DeepEqual(g.Message, w.Message) {
			t.Fatalf("List(%s)[%d] differs from what was added:\n got channel=%q created=%v %s\nwant channel=%q created=%v %s",
				ch, i, g.ChannelID, g.Created, describe(g.Message), w.ChannelID, w.Created, describe(w.Message))
		}
	}
}

func wantCode(t *testing.T, err error, code imv2.Code) {
	t.Helper()
	var e *imv2.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("got error %v, want an *imv2.Error with code %s", err, code)
	}
}

func ids(l []imv2.PendingEntry) []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = fmt.Sprintf("%.20s", e.Message.MessageID)
	}
	return out
}

// describe prints a message short enough for a failure line.
func describe(m imv2.ChatMessage) string {
	return fmt.Sprintf("{id=%.20q text(%d)=%.40q created_at=%d files=%+v}", m.MessageID, len(m.Text), m.Text, m.CreatedAt, m.Files)
}

// together runs f(0) to f(n-1) on n goroutines released at once, and
// returns when all have returned.
func together(n int, f func(i int)) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			f(i)
		}()
	}
	close(gate)
	wg.Wait()
}
