package connector

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/state"
)

// countingReleaser is an editor that counts Released calls per key.
type countingReleaser struct {
	editor
	mu       sync.Mutex
	released map[string]int
}

func (r *countingReleaser) Released(_ context.Context, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released[key]++
	return nil
}

// slowBindings is the kit's in-memory store with the latency of a store
// across a network on every binding call, which widens any window
// between a change and a decision taken on a separate read.
type slowBindings struct{ *memoryStore }

func (s slowBindings) Bind(ctx context.Context, b state.Binding) (state.BindingChange, error) {
	time.Sleep(100 * time.Microsecond)
	return s.memoryStore.Bind(ctx, b)
}

func (s slowBindings) Unbind(ctx context.Context, channelID string) (state.BindingChange, error) {
	time.Sleep(100 * time.Microsecond)
	return s.memoryStore.Unbind(ctx, channelID)
}

func (s slowBindings) Channels(ctx context.Context, key string) ([]string, error) {
	time.Sleep(100 * time.Microsecond)
	return s.memoryStore.Channels(ctx, key)
}

// TestKit_W6_ReleaserToldOncePerKeyUnderConcurrentRebinds: channels move
// from key to key at once through the kit, in rounds (each key's count
// falls to zero exactly once), then unbind or drop at once; the Releaser
// hears of every key exactly once.
func TestKit_W6_ReleaserToldOncePerKeyUnderConcurrentRebinds(t *testing.T) {
	p := &countingReleaser{released: map[string]int{}}
	k, _ := newUnit(t, p, true, Options{Store: slowBindings{newMemoryStore(fakeclock.New(time.Unix(0, 0)))}})
	ctx := context.Background()
	const channels, rounds = 12, 10
	key := func(r int) string { return fmt.Sprintf("room-%d", r) }
	run := func(op func(ch string) error) {
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for i := range channels {
			wg.Go(func() {
				<-gate
				if err := op(fmt.Sprintf("ch_%d", i)); err != nil {
					t.Error(err)
				}
			})
		}
		close(gate)
		wg.Wait()
	}
	for r := range rounds {
		run(func(ch string) error { return k.Bind(ctx, state.Binding{ChannelID: ch, Key: key(r)}) })
	}
	run(func(ch string) error {
		if ch[len(ch)-1]%2 == 0 {
			k.dropped(ch)
			return nil
		}
		return k.Unbind(ctx, ch)
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	for r := range rounds {
		if n := p.released[key(r)]; n != 1 {
			t.Errorf("key %s released %d times; want 1", key(r), n)
		}
	}
	if len(p.released) != rounds {
		t.Errorf("released %v; want each of %d keys once", p.released, rounds)
	}
}
