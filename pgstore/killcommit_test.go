package pgstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/pgstore"
)

// The kill test's child: TestMain turns the test binary into killChildMain
// when envKillDB is set.
const (
	envKillDB   = "IMV2_KILL_DB"   // the database URL (through the watch)
	envKillUpto = "IMV2_KILL_UPTO" // finals per channel, then "done"; unset: for ever
)

const (
	// killChannels is how many channels the child delivers on at once,
	// so its Claims and Records share large group commits.
	killChannels = 48
	// killOwner is the child's claim owner in every life: a restarted
	// Connector keeps its name (as a pod of a StatefulSet does), so its
	// own interrupted claims are orphaned at once, with no lease to wait.
	killOwner = "owner_killcommit"
	// killRounds is how many lives are killed; one more, not killed until
	// done, resends every final.
	killRounds = 5
	// killAfter is how many finals a life accepts before the kill is armed.
	killAfter = 150
	// killApp names the child's sessions in pg_stat_activity.
	killApp = "imv2_killchild"
)

// killChildMain is the child: killChannels Connector channels on one
// store, each receiving finals f0, f1, … one after another, from f0 in
// every life (so every final acked in an earlier life is resent). It prints "post CH ID" when the Target
// posts a final, "ack CH ID STATUS CODE" when the final's ack leaves, and
// "done CH" after envKillUpto finals, each line one write(2), until it is
// killed. The post line is the side effect itself: a final is posted
// when, and only when, its line is in the pipe.
func killChildMain() int {
	ctx := context.Background()
	upto, _ := strconv.Atoi(os.Getenv(envKillUpto))
	st, err := pgstore.Open(ctx, os.Getenv(envKillDB), pgstore.Options{})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		_, _ = fmt.Fprintf(os.Stdout, format+"\n", args...) // unbuffered: the line is out when it returns
	}
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	target := imv2.TargetFunc(func(_ context.Context, ch string, m *imv2.ChatMessage) error {
		say("post %s %s", ch, m.MessageID)
		return nil
	})
	for c := range killChannels {
		go func() {
			id := "cch_" + strconv.Itoa(c)
			w := &killSink{pkts: make(chan *imv2.Packet, 16)}
			ch, err := imv2.NewChannel(id, imv2.RoleConnector, neg, w, target,
				&imv2.Options{Pending: st.Pending(), Completed: st.Completed(), ClaimOwner: killOwner})
			if err != nil {
				say("error: %v", err)
				return
			}
			for j := 0; upto == 0 || j < upto; j++ {
				p, err := imv2.NewChatMessage(id, imv2.ToConnector, imv2.ChatMessage{MessageID: "f" + strconv.Itoa(j), Text: "answer"})
				if err == nil {
					err = ch.Receive(ctx, p)
				}
				if err != nil {
					say("error: %v", err)
					return
				}
				a, err := imv2.DecodeChatMessageAck(<-w.pkts)
				if err != nil {
					say("error: %v", err)
					return
				}
				code := string(a.Code)
				if code == "" {
					code = "-"
				}
				say("ack %s %s %s %s", id, a.MessageID, a.Status, code)
			}
			say("done %s", id)
		}()
	}
	select {} // until killed
}

// killSink is a Channel's transport: the packets it sends.
type killSink struct{ pkts chan *imv2.Packet }

func (s *killSink) Send(_ context.Context, p *imv2.Packet) error {
	s.pkts <- p
	return nil
}

// killHistory is what the children printed over all their lives, and
// the checks each line must pass.
type killHistory struct {
	t       *testing.T
	watch   *pgWatch
	posts   map[string]int  // "CH ID" → posts, all lives
	acked   map[string]bool // answered accepted, or duplicate, in some life
	unacked map[string]bool // answered duplicate before any accepted: its ack was lost in a kill
	unknown map[string]bool // answered rejected delivery_outcome_unknown: an orphaned claim
	top     int             // the highest final index printed
	done    int             // "done" lines of this life
	ok      int             // finals accepted in this life
}

// line checks one line of the child: no final is posted twice; a final
// acked before is answered duplicate (its record is durable); an accepted
// final's Record was committed before its ack (the server answered its
// batch, as the watch saw); one answered duplicate was posted (its
// record was committed, its ack perhaps lost in a kill); any other answer
// is delivery_outcome_unknown, for an orphaned claim whose post may have
// started (a Begin of it reached the server; posted or not before the
// kill, nobody can tell, and the Target does not post idempotently).
func (h *killHistory) line(s string) {
	t := h.t
	f := strings.Fields(s)
	if len(f) == 0 || f[0] == "error:" {
		t.Fatalf("child: %s", s)
	}
	if f[0] == "done" {
		h.done++
		return
	}
	if len(f) < 3 {
		t.Fatalf("child: %s", s)
	}
	key := f[1] + " " + f[2]
	j, _ := strconv.Atoi(strings.TrimPrefix(f[2], "f"))
	h.top = max(h.top, j)
	switch f[0] {
	case "post":
		h.posts[key]++
		if n := h.posts[key]; n > 1 {
			t.Errorf("S8: %s posted %d times over the kills", key, n)
		}
		return
	case "ack":
	default:
		t.Fatalf("child: %s", s)
	}
	if len(f) < 5 {
		t.Fatalf("child: %s", s)
	}
	status, code := imv2.AckStatus(f[3]), imv2.Code(f[4])
	if h.acked[key] && status != imv2.AckDuplicate {
		t.Errorf("S8: %s was acked before a kill; after the restart its resend is answered %s %s, want duplicate", key, status, code)
	}
	switch {
	case status == imv2.AckAccepted:
		if !h.watch.committed(f[1], f[2]) {
			t.Errorf("S8: %s acked before the server answered the commit of its Record", key)
		}
		h.ok++
	case status == imv2.AckDuplicate:
		if h.posts[key] == 0 {
			t.Errorf("%s answered duplicate but never posted", key)
		}
		if !h.acked[key] {
			h.unacked[key] = true
		}
	case status == imv2.AckRejected && code == imv2.CodeDeliveryOutcomeUnknown:
		// Unknown only where the post may have started: the store was
		// told it began (imv2.ClaimStarter); one whose post never began
		// is posted on the resend, not lost.
		if !h.watch.beginSent(f[1], f[2]) {
			t.Errorf("S8: %s answered delivery_outcome_unknown, but no Begin of it reached the server: its post never began", key)
		}
		h.unknown[key] = true
		return
	default:
		t.Errorf("child: %s (want accepted, duplicate or delivery_outcome_unknown)", s)
		return
	}
	h.acked[key] = true
}

// TestGroupCommit_S8_KillMidBatch: a Connector process delivering finals
// on 48 channels, its Claims and Records sharing group commits, is killed
// with SIGKILL while group commits are in flight, restarted on the same
// database and killed again (a crash loop of five lives); a sixth life
// resends every final and is stopped when done. The PostgreSQL server
// lives on. Over all lives: every final acked is answered duplicate when
// resent (its record was committed before its ack left), no final is
// posted twice, a final whose record was committed but whose ack was
// lost in a kill is answered duplicate, a final whose claim was orphaned
// by a kill after its Begin was sent (posted or not) is answered
// delivery_outcome_unknown, never posted again, and one orphaned before
// its Begin is posted on the resend (S8, imv2.ClaimStarter).
//
// How it knows each kill lands mid-commit: the child talks to
// PostgreSQL through a watch of the wire protocol (pgWatch), which tells
// each group commit's batch by its statements and follows it until its
// ReadyForQuery. After killAfter accepted finals in a life, the watch is
// armed: at the next group of two or more calls with Records that the
// child sends, it stops forwarding answers to the child, and the test
// kills the child at once. So every kill finds at least that group sent
// and unanswered; the test logs all the groups in flight at each kill,
// and, once the dead child's sessions are gone, checks that each in-flight
// group's Records were committed all or none.
//
// PostgreSQL commits a batch it received whole even after its client
// died, so a kill loses only what was acked before its commit was sent
// (an ack on enqueue, a write-behind): an ack between the send and the
// answer loses nothing to a kill, and only the watch sees it. So each
// accepted ack is also checked against the watch: the server answered
// its Record's batch, without an error, before the ack left.
func TestGroupCommit_S8_KillMidBatch(t *testing.T) {
	ctx := context.Background()
	db := srv.NewDatabase(t)
	watch, via := newPGWatch(t, db)
	via += "&application_name=" + killApp
	h := &killHistory{t: t, watch: watch, posts: map[string]int{}, acked: map[string]bool{}, unacked: map[string]bool{},
		unknown: map[string]bool{}}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	var inflight, withRecords, committed, aborted int
	for life := range killRounds + 1 {
		final := life == killRounds
		env := []string{envKillDB + "=" + via}
		if final {
			env = append(env, envKillUpto+"="+strconv.Itoa(h.top+2)) // +1: one a life may have claimed unseen
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 256)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		h.done, h.ok = 0, 0
		var (
			frozen <-chan []watchBatch
			groups []watchBatch
			killed bool
			guard  <-chan time.Time // a stuck child fails the test, not CI's timeout
		)
		kill := func() {
			if !killed {
				_ = cmd.Process.Kill() // SIGKILL
				killed = true
			}
		}
		if final {
			guard = time.After(60 * time.Second)
		}
		func() {
			defer func() { // also when the test fails here: no child, no reader left behind
				kill()
				for range lines { // the child's last lines: read, not checked, after a failure
				}
				_ = cmd.Wait()
				watch.thaw()
			}()
			for {
				select {
				case s, ok := <-lines:
					if !ok {
						return
					}
					h.line(s)
					if t.Failed() {
						return
					}
				case groups = <-frozen:
					kill()
					frozen = nil
				case <-guard:
					if final {
						t.Fatalf("life %d: %d of %d channels done after 60 s", life, h.done, killChannels)
					}
					t.Fatalf("life %d: no group commit with Records in flight within 20 s of arming", life)
				}
				switch {
				case final && h.done == killChannels && !killed:
					kill()
				case !final && frozen == nil && groups == nil && !killed && h.ok >= killAfter:
					frozen = watch.arm()
					guard = time.After(20 * time.Second)
				}
			}
		}()
		if t.Failed() {
			return
		}
		if final {
			break
		}
		if groups == nil {
			t.Fatalf("life %d: the child exited before the kill", life)
		}
		killGone(t, conn)
		var desc []string
		for _, g := range groups {
			inflight++
			if len(g.records) == 0 {
				desc = append(desc, fmt.Sprintf("%d calls (%d claims)", g.calls, g.claims))
				continue
			}
			withRecords++
			var chs, ids []string
			for _, r := range g.records {
				chs, ids = append(chs, r[0]), append(ids, r[1])
			}
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM imv2_completed c
				JOIN unnest($1::text[], $2::text[]) AS t(ch, id) ON c.channel_id = t.ch::bytea AND c.message_id = t.id::bytea`,
				chs, ids).Scan(&n); err != nil {
				t.Fatal(err)
			}
			state := "committed"
			switch n {
			case len(g.records):
				committed++
			case 0:
				aborted++
				state = "rolled back"
			default:
				t.Errorf("life %d: a group in flight at the kill committed %d of its %d records", life, n, len(g.records))
			}
			desc = append(desc, fmt.Sprintf("%d calls (%d claims, %d records: %s)", g.calls, g.claims, len(g.records), state))
		}
		t.Logf("life %d: killed after %d finals accepted; group commits in flight: %s", life, h.ok, strings.Join(desc, "; "))
	}
	if h.done != killChannels {
		t.Fatalf("the last life finished %d of %d channels", h.done, killChannels)
	}
	var orphanPosted int
	for key := range h.unknown {
		orphanPosted += h.posts[key]
	}
	t.Logf("%d finals acked; %d committed with their acks lost in a kill (then answered duplicate); %d orphaned claims answered delivery_outcome_unknown (%d of them posted before their kill, %d lost: their Begin sent, the kill before their post); %d group commits in flight at the kills, %d with Records (%d committed, %d rolled back)",
		len(h.acked)-len(h.unacked), len(h.unacked), len(h.unknown), orphanPosted, len(h.unknown)-orphanPosted, inflight, withRecords, committed, aborted)
}

// killGone waits until the killed child's sessions have ended, so every
// transaction it sent is committed or rolled back.
func killGone(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", killApp).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions of the killed child still open after 20 s", n)
		}
		time.Sleep(10 * time.Millisecond) // a dead process's sessions end as the server notices
	}
}
