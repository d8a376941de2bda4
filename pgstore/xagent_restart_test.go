package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/pgstore"
)

// The xAgent side of TestXAgentRestart_S1_S10_W11_PendingFinalsOutliveTheProcess
// is this test binary run again with these set.
const (
	envXAgentDB      = "IMV2_XAGENT_DB"      // its database: pending finals, connector_id, channels
	envXAgentURL     = "IMV2_XAGENT_URL"     // the Connector's base URL
	envXAgentChannel = "IMV2_XAGENT_CHANNEL" // the channel it answers on
	envXAgentCursor  = "IMV2_XAGENT_CURSOR"  // the file of the next final to send
)

// restartFinals are sent in all; each stop ends a life of the xAgent side
// while the Connector's post of final number at is held, so that final,
// and what the xAgent sent after it, is unacknowledged at the stop.
const restartFinals = 500

var restartStops = []struct {
	at  int
	sig syscall.Signal // SIGKILL: killed; SIGTERM: Client.Close without draining
}{
	{61, syscall.SIGKILL}, {100, syscall.SIGTERM}, {139, syscall.SIGKILL}, {223, syscall.SIGKILL},
	{260, syscall.SIGTERM}, {301, syscall.SIGKILL}, {377, syscall.SIGKILL},
}

func finalID(i int) string { return fmt.Sprintf("final-%04d", i) }

// holdingPlatform is the Connector's IM platform: it counts the posts of
// each final, and holds a post of the finals in hold until released.
type holdingPlatform struct {
	mu      sync.Mutex
	posts   map[string]int
	hold    map[string]chan struct{}
	holding chan string // a held post began
}

func (p *holdingPlatform) PostMessage(ctx context.Context, _ string, m *imv2.ChatMessage) error {
	p.mu.Lock()
	p.posts[m.MessageID]++
	release := p.hold[m.MessageID]
	p.mu.Unlock()
	if release != nil {
		p.holding <- m.MessageID
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// release lets the held post of id go on; a later post of it is not held.
func (p *holdingPlatform) release(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.hold[id])
	delete(p.hold, id)
}

// TestXAgentRestart_S1_S10_W11_PendingFinalsOutliveTheProcess: the
// xAgent side keeps its pending finals (Options.Pending) and its
// connector_id and channel (ClientConfig.Store) in one pgstore database.
// It sends 500 finals and is stopped seven times, each time while its
// finals are unacknowledged: five times SIGKILLed, twice Closed without
// draining (SIGTERM makes the child call Client.Close and exit).
// Restarted on the same database each time (it goes on from the last
// final Send took, kept in a cursor file), it reopens the channel under
// its ID with the same connector_id, and the Connector posts every final
// exactly once: those pending at a stop come back from the database and
// are resent (S1, S10, W11); one acked before the stop but resent anyway
// (the cursor lagging Send) is answered duplicate, not posted again (S8).
func TestXAgentRestart_S1_S10_W11_PendingFinalsOutliveTheProcess(t *testing.T) {
	ctx := context.Background()
	const channelID = "cch_xagent_restart"
	plat := &holdingPlatform{posts: map[string]int{}, hold: map[string]chan struct{}{}, holding: make(chan string, 1)}
	for _, s := range restartStops {
		plat.hold[finalID(s.at)] = make(chan struct{})
	}
	var (
		mu     sync.Mutex
		opened []string
	)
	conn := startReplica(t, srv.NewDatabase(t), plat, imv2.Options{}, func(cfg *dataplane.ServerConfig) {
		cfg.OnChannelOpen = func(id string) {
			mu.Lock()
			opened = append(opened, id)
			mu.Unlock()
		}
	})
	// The channel was opened in an earlier life of this xAgent: the
	// Connector issued it, and the xAgent's store holds it to reopen.
	if err := conn.st.Register(ctx, channelID); err != nil {
		t.Fatal(err)
	}
	xurl := srv.NewDatabase(t)
	xst := openStore(t, xurl, pgstore.Options{})
	if err := xst.AddChannel(ctx, channelID); err != nil {
		t.Fatal(err)
	}
	cursor := filepath.Join(t.TempDir(), "cursor")

	run := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envXAgentDB+"="+xurl, envXAgentURL+"="+conn.hs.URL,
			envXAgentChannel+"="+channelID, envXAgentCursor+"="+cursor)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	var connectorID string
	for life, s := range restartStops {
		cmd := run()
		select {
		case id := <-plat.holding:
			if id != finalID(s.at) {
				t.Fatalf("life %d: the post of %s was held, want %s", life, id, finalID(s.at))
			}
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("life %d: no post of %s within 60 s", life, finalID(s.at))
		}
		if err := cmd.Process.Signal(s.sig); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if s.sig == syscall.SIGTERM && err != nil {
			t.Fatalf("life %d: the Close on SIGTERM: %v", life, err)
		}
		// The held final cannot have been acknowledged: it is pending in
		// the database the next life starts from.
		pending, err := xst.List(ctx, channelID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(pending, func(e imv2.PendingEntry) bool { return e.Message.MessageID == finalID(s.at) }) {
			t.Fatalf("life %d: %s is not pending after the %v; pending: %d", life, finalID(s.at), s.sig, len(pending))
		}
		id, err := xst.ConnectorID(ctx)
		if err != nil || id == "" {
			t.Fatalf("life %d: stored connector_id %q, %v", life, id, err)
		}
		if connectorID == "" {
			connectorID = id
		} else if id != connectorID {
			t.Fatalf("life %d: stored connector_id %s, want %s kept across restarts", life, id, connectorID)
		}
		t.Logf("life %d: %v with %d finals pending", life, s.sig, len(pending))
		plat.release(finalID(s.at))
	}
	cmd := run()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the last life, which sends the rest and waits for every ack: %v", err)
		}
	case <-time.After(120 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("the last life did not finish within 120 s")
	}

	plat.mu.Lock()
	defer plat.mu.Unlock()
	var lost, twice []string
	for i := 1; i <= restartFinals; i++ {
		switch n := plat.posts[finalID(i)]; {
		case n == 0:
			lost = append(lost, finalID(i))
		case n > 1:
			twice = append(twice, finalID(i))
		}
	}
	if len(lost) > 0 || len(twice) > 0 || len(plat.posts) != restartFinals {
		t.Fatalf("%d finals lost %q, %d posted more than once %q, %d posted in all; want %d once each",
			len(lost), lost, len(twice), twice, len(plat.posts), restartFinals)
	}
	if pending, err := xst.List(ctx, channelID); err != nil || len(pending) != 0 {
		t.Fatalf("at the end %d finals pending (%v), want none", len(pending), err)
	}
	if ids, err := xst.ChannelIDs(ctx); err != nil || !slices.Equal(ids, []string{channelID}) {
		t.Fatalf("stored channels %q, %v; want [%s]", ids, err, channelID)
	}
	if got := conn.srv.ConnectorOf(channelID); got != connectorID {
		t.Fatalf("the Connector holds the channel under connector_id %s, the xAgent stored %s", got, connectorID)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(opened) != len(restartStops)+1 || slices.ContainsFunc(opened, func(id string) bool { return id != channelID }) {
		t.Fatalf("channels opened %q; want %s once per life (%d)", opened, channelID, len(restartStops)+1)
	}
}

// xagentChildMain is the xAgent side of a life: it dials (which reopens
// the stored channel), sends the finals from its cursor on, and exits 0
// once none is pending. On SIGTERM it Closes the Client, pending finals
// and all, and exits 0.
func xagentChildMain() int {
	if err := xagentChild(); err != nil {
		fmt.Fprintln(os.Stderr, "xagent child:", err)
		return 1
	}
	return 0
}

func xagentChild() error {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, os.Getenv(envXAgentDB), pgstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	client, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL:    os.Getenv(envXAgentURL),
		Target: imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }),
		Store:  st,
		Options: &imv2.Options{Pending: st, Completed: st, AckTimeout: time.Second,
			RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond},
	})
	if err != nil {
		return err
	}
	defer client.Close()
	var closing atomic.Bool
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		closing.Store(true)
		if err := client.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "xagent child: Close:", err)
			os.Exit(1)
		}
		_ = st.Close()
		os.Exit(0)
	}()
	channelID, cursor := os.Getenv(envXAgentChannel), os.Getenv(envXAgentCursor)
	next := 1
	if b, err := os.ReadFile(cursor); err == nil {
		if next, err = strconv.Atoi(string(b)); err != nil {
			return fmt.Errorf("cursor %q: %w", b, err)
		}
	}
	for i := next; i <= restartFinals; i++ {
		m := imv2.ChatMessage{MessageID: finalID(i), Text: fmt.Sprintf("final number %d", i)}
		if _, err := client.Send(ctx, channelID, m); err != nil {
			if closing.Load() {
				select {} // the Close on SIGTERM exits
			}
			return fmt.Errorf("Send %s: %w", m.MessageID, err)
		}
		// Renamed into place, so a kill never leaves a torn cursor.
		if err := os.WriteFile(cursor+".tmp", []byte(strconv.Itoa(i+1)), 0o600); err != nil {
			return err
		}
		if err := os.Rename(cursor+".tmp", cursor); err != nil {
			return err
		}
	}
	for {
		pending, err := st.List(ctx, channelID)
		if closing.Load() {
			select {}
		}
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-time.After(20 * time.Millisecond): // polling another process's acks through the database
		case <-ctx.Done():
			return errors.New("finals still pending at the deadline")
		}
	}
}
