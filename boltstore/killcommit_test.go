package boltstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
)

// killChildEnv names the file a killed child of
// TestGroupCommit_S8_KillMidBatch delivers finals on.
const killChildEnv = "BOLTSTORE_KILL_CHILD"

// killChannels is how many channels the child delivers on at once, so its
// Claims and Records share group commits.
const killChannels = 32

// killChildMain is the child: killChannels Connector channels on one
// store, each receiving finals f0, f1, … one after another, for ever. It
// prints "post CH ID" when the Target posts a final and "ack CH ID STATUS"
// when the final's ack leaves, each line one write(2), until it is killed.
func killChildMain(path string) int {
	st, err := boltstore.Open(path, boltstore.Options{})
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
	ctx := context.Background()
	for c := range killChannels {
		go func() {
			id := "cch_" + strconv.Itoa(c)
			w := &sink{pkts: make(chan *imv2.Packet, 16)}
			ch, err := imv2.NewChannel(id, imv2.RoleConnector, neg, w, target, &imv2.Options{Pending: st.Pending(), Completed: st.Completed()})
			if err != nil {
				say("error: %v", err)
				return
			}
			for j := 0; ; j++ {
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
				say("ack %s %s %s", id, a.MessageID, a.Status)
			}
		}()
	}
	select {} // until killed
}

// TestGroupCommit_S8_KillMidBatch: a process delivering finals on 32
// channels, its Claims and Records in group commits, is killed with
// SIGKILL while commits are under way (finals posted but not yet acked).
// After a restart on the same file, every final is delivered again: one
// acked before the kill is answered duplicate (its record was durable),
// and no final is posted twice over both lives.
func TestGroupCommit_S8_KillMidBatch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	posts := map[string]int{}         // "CH ID" → posts, both lives
	acked := map[string]bool{}        // "CH ID" accepted before the kill
	last := make([]int, killChannels) // highest final index seen per channel
	unacked := 0                      // posted, not yet acked, at the kill
	killed := false
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) == 0 || f[0] == "error:" {
			t.Fatalf("child: %s", lines.Text())
		}
		if len(f) < 3 {
			continue
		}
		key := f[1] + " " + f[2]
		c, _ := strconv.Atoi(strings.TrimPrefix(f[1], "cch_"))
		j, _ := strconv.Atoi(strings.TrimPrefix(f[2], "f"))
		last[c] = max(last[c], j)
		switch f[0] {
		case "post":
			posts[key]++
			if !killed {
				unacked++
			}
		case "ack":
			if f[3] != string(imv2.AckAccepted) {
				t.Fatalf("child: %s", lines.Text())
			}
			acked[key] = true
			if !killed {
				unacked--
			}
		}
		if !killed && len(acked) >= 400 {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			killed = true
			if unacked == 0 {
				t.Log("no final was between its post and its ack at the kill")
			}
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("the child stopped after %d acks", len(acked))
	}
	t.Logf("killed after %d acks, %d finals posted and not acked", len(acked), unacked)

	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	target := imv2.TargetFunc(func(_ context.Context, ch string, m *imv2.ChatMessage) error {
		posts[ch+" "+m.MessageID]++ // one channel at a time below
		return nil
	})
	for c := range killChannels {
		id := "cch_" + strconv.Itoa(c)
		w := &sink{pkts: make(chan *imv2.Packet, 16)}
		ch, err := imv2.NewChannel(id, imv2.RoleConnector, neg, w, target, &imv2.Options{Pending: st.Pending(), Completed: st.Completed()})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j <= last[c]+1; j++ { // +1: one the child may have claimed unseen
			mid := "f" + strconv.Itoa(j)
			p, err := imv2.NewChatMessage(id, imv2.ToConnector, imv2.ChatMessage{MessageID: mid, Text: "answer"})
			if err != nil {
				t.Fatal(err)
			}
			if err := ch.Receive(ctx, p); err != nil {
				t.Fatal(err)
			}
			a, err := imv2.DecodeChatMessageAck(w.next(t))
			if err != nil {
				t.Fatal(err)
			}
			key := id + " " + mid
			if acked[key] && a.Status != imv2.AckDuplicate {
				t.Errorf("S8: %s was acked before the kill; after the restart its resend is answered %s %s, want duplicate", key, a.Status, a.Code)
			}
			if n := posts[key]; n > 1 {
				t.Errorf("S8: %s posted %d times over the kill", key, n)
			}
		}
		_ = ch.Close()
	}
}
