package dataplane

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/state"
)

// orderRegistry is a MemoryRegistry that logs Forget into a shared log,
// and can hold a Forget until released.
type orderRegistry struct {
	*state.MemoryRegistry
	log     func(string)
	entered chan string   // each Forget's ID, when it starts
	hold    chan struct{} // when non-nil, Forget waits for it to close
}

func (r *orderRegistry) Forget(ctx context.Context, id string) error {
	r.log("forget " + id)
	if r.entered != nil {
		r.entered <- id
	}
	if r.hold != nil {
		<-r.hold
	}
	return r.MemoryRegistry.Forget(ctx, id)
}

type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) log(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

// hook is a channel hook that logs each ID into l and refuses it
// (channel_unavailable) while *refuse is set.
func (l *callLog) hook(refuse *bool) func(context.Context, string) error {
	return func(_ context.Context, id string) error {
		l.log(id)
		if *refuse {
			return imv2.Errorf(imv2.CodeChannelUnavailable, "refused")
		}
		return nil
	}
}

func (l *callLog) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// TestServer_W5_DropRunsOnChannelDropBeforeForget: a channel dropped at
// the end of its grace is handed to OnChannelDrop before the Registry
// forgets it (a crash between leaves a registered channel, never the
// author's state of a forgotten one); when OnChannelDrop fails the ID
// stays registered, and a reopen with it finds the channel again.
func TestServer_W5_DropRunsOnChannelDropBeforeForget(t *testing.T) {
	for _, fail := range []bool{false, true} {
		clk := fakeclock.New(t0)
		var l callLog
		reg := &orderRegistry{MemoryRegistry: state.NewMemoryRegistry(0), log: l.log}
		dropped := make(chan string, 1)
		srv, err := NewServer(ServerConfig{
			Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }, Clock: clk, Registry: reg,
			OnChannelDrop: func(id string) error {
				l.log("drop " + id)
				dropped <- id
				if fail {
					return errors.New("store down")
				}
				return nil
			},
		})
		require.NoError(t, err)
		p, done := pipeSession(t, srv)
		p.hello("")
		ch := p.open("")
		require.NoError(t, p.c.Close())
		<-done
		clk.Advance(DefaultOfflineGrace)
		require.Equal(t, ch, recv(t, dropped))
		require.NoError(t, srv.Close()) // waits for the drop to end
		known, err := reg.Known(context.Background(), ch)
		require.NoError(t, err)
		if fail {
			require.Equal(t, []string{"drop " + ch}, l.got(), "a failed OnChannelDrop keeps the ID")
			require.True(t, known)
		} else {
			require.Equal(t, []string{"drop " + ch, "forget " + ch}, l.got())
			require.False(t, known)
		}
	}
}

// TestServer_W5_SlowForgetStallsNoHello: the Registry's Forget of a
// dropped channel runs outside the Server's lock: while it hangs, a
// hello of another connector_id is answered and a new channel opens;
// a channel.open of the ID being forgotten gets a new ID (it is not
// reopened only to be forgotten), and once the Forget ends the new ID
// is still registered.
func TestServer_W5_SlowForgetStallsNoHello(t *testing.T) {
	clk := fakeclock.New(t0)
	reg := &orderRegistry{MemoryRegistry: state.NewMemoryRegistry(0), log: func(string) {},
		entered: make(chan string, 1), hold: make(chan struct{})}
	srv, err := NewServer(ServerConfig{
		Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }, Clock: clk, Registry: reg,
	})
	require.NoError(t, err)
	defer srv.Close()
	release := sync.OnceFunc(func() { close(reg.hold) })
	defer release() // before Close, which waits for the drop
	p, done := pipeSession(t, srv)
	p.hello("")
	ch := p.open("")
	require.NoError(t, p.c.Close())
	<-done
	advanced := make(chan struct{})
	go func() { defer close(advanced); clk.Advance(DefaultOfflineGrace) }()
	require.Equal(t, ch, recv(t, reg.entered), "the drop reached Forget")
	defer func() { <-advanced }()

	// Forget hangs; the Server is not stuck.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, _ := pipeSession(t, srv)
	hello := make(chan string, 1)
	go func() { hello <- q.hello("") }()
	select {
	case <-hello:
	case <-ctx.Done():
		release()
		t.Fatal("a hello waited for a hanging Registry.Forget")
	}
	<-advanced // the grace timer's callback does not wait for the Forget either
	fresh := q.open(ch)
	require.NotEqual(t, ch, fresh, "the ID being forgotten is not reopened")
	release()
	require.NoError(t, srv.Close())
	for id, want := range map[string]bool{ch: false, fresh: true} {
		known, err := reg.Known(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, want, known, "Known(%s)", id)
	}
}

// TestServer_W5_OnChannelCreateOncePerIssuedID: OnChannelCreate is called
// for each ID the Server issues (a channel.open without an ID, or with an
// unknown one), never for a reopen; its error refuses the channel.open.
func TestServer_W5_OnChannelCreateOncePerIssuedID(t *testing.T) {
	var l callLog
	refuse := false
	srv, err := NewServer(ServerConfig{
		Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() },
		OnChannelCreate: l.hook(&refuse),
	})
	require.NoError(t, err)
	defer srv.Close()
	p, _ := pipeSession(t, srv)
	p.hello("")
	a := p.open("")
	require.Equal(t, a, p.open(a), "a reopen")
	b := p.open("cch_unknown")
	require.NotEqual(t, "cch_unknown", b)
	require.Equal(t, []string{a, b}, l.got())
	refuse = true
	expectError(t, p.call("channel.open", "", nil), imv2.CodeChannelUnavailable)
	require.Equal(t, a, p.open(a), "a reopen is not refused")
}

// knownGate is a MemoryRegistry whose first Known of one ID waits until
// released, and which counts the Known calls of that ID.
type knownGate struct {
	*state.MemoryRegistry
	id      string
	entered chan struct{}
	hold    chan struct{}
	mu      sync.Mutex
	calls   int
}

func (r *knownGate) Known(ctx context.Context, id string) (bool, error) {
	if id == r.id {
		r.mu.Lock()
		r.calls++
		first := r.calls == 1
		r.mu.Unlock()
		if first {
			close(r.entered)
			<-r.hold
		}
	}
	return r.MemoryRegistry.Known(ctx, id)
}

// TestServer_W5_ReopenAsksAgainAfterADropMeanwhile: a drop that begins
// while a reopen asks the Registry about its ID may make the answer stale
// (its Forget), so the reopen asks again before it reuses the ID.
func TestServer_W5_ReopenAsksAgainAfterADropMeanwhile(t *testing.T) {
	clk := fakeclock.New(t0)
	reg := &knownGate{MemoryRegistry: state.NewMemoryRegistry(0), id: "cch_old", entered: make(chan struct{}), hold: make(chan struct{})}
	require.NoError(t, reg.Register(context.Background(), "cch_old")) // issued before a restart
	srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }, Clock: clk, Registry: reg})
	require.NoError(t, err)
	defer srv.Close()
	release := sync.OnceFunc(func() { close(reg.hold) })
	defer release()

	other, done := pipeSession(t, srv) // a connector_id whose channel will drop
	other.hello("")
	other.open("")
	require.NoError(t, other.c.Close())
	<-done

	p, _ := pipeSession(t, srv)
	p.hello("")
	reopened := make(chan string, 1)
	go func() { reopened <- p.open("cch_old") }()
	recv(t, reg.entered)
	clk.Advance(DefaultOfflineGrace) // the other channel drops meanwhile
	release()
	require.Equal(t, "cch_old", recv(t, reopened), "still registered: reused")
	reg.mu.Lock()
	defer reg.mu.Unlock()
	require.Equal(t, 2, reg.calls, "the reopen asked again after the drop")
}
