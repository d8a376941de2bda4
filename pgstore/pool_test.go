package pgstore_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
)

// limitedRole makes the database of dbURL owned by a new role allowed
// roleConns connections, and returns the URL that connects as it: the
// replicas' pools (16 each) want far more, so most connects are refused
// (too many connections for role), as with a low max_connections.
func limitedRole(t *testing.T, dbURL string, roleConns int) string {
	t.Helper()
	ctx := context.Background()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db := u.Query().Get("dbname")
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	role := "small_" + db
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT %d", role, roleConns),
		fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", db, role),
		fmt.Sprintf("ALTER SCHEMA public OWNER TO %s", role),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return dbURL + "&user=" + role
}

// TestFaults_S1_S8_PoolExhaustion: two replicas whose database role may
// hold 8 connections in all (their pools want 16 each, and each Relay
// listens on one more), 50 channels on one xAgent connection, 4 finals
// and 2 user messages each, all at once, and a move to the other
// replica in the middle. Store calls fail with "too many connections"
// throughout. No final is posted twice to the deduplicating platform
// (a Record that failed after the post is retried while its claim is
// renewed, instead of leaving an orphan that the resend posts again),
// any unknown outcome is reported, and every user message a Relay
// accepted reaches xAgent once.
func TestFaults_S1_S8_PoolExhaustion(t *testing.T) {
	own := ownServer(t)
	admin := own.NewDatabase(t)
	dbURL := limitedRole(t, admin, 8)
	ctx := context.Background()
	plat := newKeyPlatform(true)
	agent := newKeyPlatform(false)
	opts := imv2.Options{TargetTimeout: faultTargetTimeout}
	reps := [2]*replica{startReplica(t, dbURL, plat, opts), startReplica(t, dbURL, plat, opts)}
	rt := newRouter(t, reps[0])
	var cc cutConn
	var f failures
	x := dialThrough(t, rt, &cc, &f, agent)

	const channels, finals, users = 50, 4, 2
	chs := make([]string, channels)
	for i := range chs {
		var err error
		for {
			if chs[i], err = x.OpenChannel(ctx, ""); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond) // an open refused while the store is short of connections: try again
		}
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted []string
		refused  atomic.Int64
	)
	begin := time.Now()
	for i, ch := range chs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range max(finals, users) {
				if j < finals {
					if _, err := x.Send(ctx, ch, imv2.ChatMessage{MessageID: fmt.Sprintf("f-%d-%d", i, j), Text: "reply"}); err != nil {
						t.Errorf("final not queued: %v", err)
					}
				}
				if j < users {
					u := fmt.Sprintf("u-%d-%d", i, j)
					for {
						if _, err := reps[(i+j)%2].relay.Send(ctx, ch, imv2.ChatMessage{MessageID: u, Text: "hello"}); err != nil {
							refused.Add(1)
							time.Sleep(50 * time.Millisecond) // not accepted: the user's client sends it again
							continue
						}
						break
					}
					mu.Lock()
					accepted = append(accepted, u)
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // the traffic under way
	rt.to.Store(reps[1])
	cc.cut()
	wg.Wait()
	told := map[string]bool{}
	waitFor(t, "50 channels settled", func() bool {
		for _, ch := range chs {
			if p, _ := pendingOf(ctx, x, ch); len(p) != 0 {
				return false
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, u := range accepted {
			if agent.count(u) == 0 {
				return false
			}
		}
		return true
	})
	for _, s := range f.list() {
		told[s] = true
		t.Logf("sender told %s", s)
	}
	twice := 0
	for i := range channels {
		for j := range finals {
			id := fmt.Sprintf("f-%d-%d", i, j)
			if n := plat.count(id); n > 1 {
				twice++
				t.Errorf("final %s posted %d times", id, n)
			}
		}
	}
	for _, u := range accepted {
		if n := agent.count(u); n != 1 {
			t.Errorf("accepted user message %s reached xAgent %d times, want 1", u, n)
		}
	}
	// Every user message was acknowledged: no pending row stays behind
	// (a Remove refused for want of a connection is tried again).
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows int
	waitFor(t, "imv2_pending empty", func() bool {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM imv2_pending").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return rows == 0
	})
	t.Logf("8 connections for 2 replicas, %d channels: %d finals (%d posted twice, %d outcomes reported unknown), %d user messages accepted after %d refusals, settled in %v",
		channels, channels*finals, twice, len(told), len(accepted), refused.Load(), time.Since(begin).Round(time.Millisecond))
}
