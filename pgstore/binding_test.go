package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/pgstore"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/storetest"
)

var _ state.Store = (*pgstore.Store)(nil)

// TestBinding_S8_W5_W6_Contract: pgstore passes the BindingStore
// contract, and a reopened store (a restarted replica) keeps every
// binding.
func TestBinding_S8_W5_W6_Contract(t *testing.T) {
	o := newOpener()
	storetest.TestBindingStore(t, func(t *testing.T) state.BindingStore {
		return o.open(t, srv.NewDatabase(t), pgstore.Options{})
	}, func(t *testing.T, s state.BindingStore) state.BindingStore {
		return o.reopen(t, s.(*pgstore.Store))
	})
}

// TestBinding_W6_CapContract: pgstore passes the cap part of the
// contract, racing Binds included.
func TestBinding_W6_CapContract(t *testing.T) {
	storetest.TestBindingCap(t, func(t *testing.T, capacity int) state.BindingStore {
		return openStore(t, srv.NewDatabase(t), pgstore.Options{BindingCap: capacity})
	})
}

// TestBinding_W6_ReplicasKeepReferenceCountsExact: goroutines on two
// replicas bind, rebind and unbind the same few channels between two keys
// at once; afterwards every key's reference count is the number of its
// bindings, and Channels lists exactly those. Without the channel row's
// lock in Bind, two rebinds of one channel both count its old key down.
func TestBinding_W6_ReplicasKeepReferenceCountsExact(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	stores := []*pgstore.Store{openStore(t, url, pgstore.Options{}), openStore(t, url, pgstore.Options{})}
	channels, keys := []string{"ch_0", "ch_1", "ch_2", "ch_3"}, []string{"room-a", "room-b"}
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 16 {
		s := stores[g%2]
		rnd := rand.New(rand.NewPCG(uint64(g), 17))
		wg.Go(func() {
			<-gate
			for range 40 {
				ch := channels[rnd.IntN(len(channels))]
				var err error
				if rnd.IntN(4) == 0 {
					_, err = s.Unbind(ctx, ch)
				} else {
					b := state.Binding{ChannelID: ch, Key: keys[rnd.IntN(len(keys))], State: state.BindingConnected, Created: time.UnixMilli(1)}
					_, err = s.Bind(ctx, b)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	close(gate)
	wg.Wait()
	counts, bound := bindingTables(t, url)
	for _, key := range keys {
		ids, err := stores[0].Channels(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if counts[key] != bound[key] || len(ids) != bound[key] {
			t.Errorf("key %s: reference count %d, %d bindings, Channels %q; want all equal", key, counts[key], bound[key], ids)
		}
	}
	if len(counts) > len(keys) {
		t.Errorf("reference counts %v; want only keys in use", counts)
	}
}

// bindingTables reads the reference counts and the bindings per key
// straight from the database.
func bindingTables(t *testing.T, url string) (counts, bound map[string]int) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	read := func(q string) map[string]int {
		rows, err := c.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for rows.Next() {
			var k []byte
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			m[string(k)] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	return read("SELECT key, n FROM imv2_binding_keys"), read("SELECT key, count(*) FROM imv2_bindings GROUP BY key")
}

// TestBinding_W6_UnbindFoundOnceAcrossReplicas: of many Unbinds of one
// channel on two replicas at once, exactly one returns the binding, so
// the kit releases its conversation once (that one says Released).
func TestBinding_W6_UnbindFoundOnceAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	stores := []*pgstore.Store{openStore(t, url, pgstore.Options{}), openStore(t, url, pgstore.Options{})}
	for round := range 5 {
		ch := fmt.Sprintf("ch_%d", round)
		if _, err := stores[0].Bind(ctx, state.Binding{ChannelID: ch, Key: "room", State: state.BindingConnected}); err != nil {
			t.Fatal(err)
		}
		var (
			mu    sync.Mutex
			found int
			wg    sync.WaitGroup
		)
		gate := make(chan struct{})
		for g := range 8 {
			wg.Go(func() {
				<-gate
				c, err := stores[g%2].Unbind(ctx, ch)
				if err != nil {
					t.Error(err)
				}
				if c.Had {
					if c.Old.Key != "room" || !c.Released {
						t.Errorf("Unbind returned %+v; want room, released", c)
					}
					mu.Lock()
					found++
					mu.Unlock()
				}
			})
		}
		close(gate)
		wg.Wait()
		if found != 1 {
			t.Fatalf("round %d: %d Unbinds found the binding; want 1", round, found)
		}
	}
	if counts, _ := bindingTables(t, url); len(counts) != 0 {
		t.Fatalf("reference counts after every channel unbound: %v; want none", counts)
	}
}

// TestBinding_CapAcrossReplicas: BindingCap counts every replica's
// bindings; a rebind of a bound channel is not a new one.
func TestBinding_CapAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	a := openStore(t, url, pgstore.Options{BindingCap: 2})
	b := openStore(t, url, pgstore.Options{BindingCap: 2})
	bind := func(s *pgstore.Store, ch, key string) error {
		_, err := s.Bind(ctx, state.Binding{ChannelID: ch, Key: key, State: state.BindingConnected})
		return err
	}
	for _, err := range []error{bind(a, "one", "k"), bind(b, "two", "k"), bind(a, "two", "k2")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var e *imv2.Error
	if err := bind(b, "three", "k"); !errors.As(err, &e) || e.Code != imv2.CodeChannelUnavailable {
		t.Fatalf("Bind beyond the cap: %v; want code %s", err, imv2.CodeChannelUnavailable)
	}
	if _, err := a.Unbind(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if err := bind(b, "three", "k"); err != nil {
		t.Fatalf("Bind after Unbind made room: %v", err)
	}
}

// TestBinding_SchemaUpgradeFromVersion2KeepsData: a database a build of
// schema version 2 wrote (no binding tables) is migrated to the current
// version when opened: its registered channels stay, and bindings work.
func TestBinding_SchemaUpgradeFromVersion2KeepsData(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	if err := s.Register(ctx, "ch_old"); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP TABLE imv2_bindings, imv2_binding_keys; DELETE FROM imv2_schema_version WHERE version >= 3"); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, url, pgstore.Options{})
	if known, err := s.Known(ctx, "ch_old"); err != nil || !known {
		t.Fatalf("channel registered at version 2: known %v, %v", known, err)
	}
	if _, err := s.Bind(ctx, state.Binding{ChannelID: "ch_old", Key: "room", State: state.BindingConnected}); err != nil {
		t.Fatalf("Bind after the upgrade: %v", err)
	}
	var v int
	if err := c.QueryRow(ctx, "SELECT max(version) FROM imv2_schema_version").Scan(&v); err != nil || v != pgstore.SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", v, err, pgstore.SchemaVersion)
	}
}

// TestBinding_W5_SchemaUpgradeFromVersion3KeepsBindings: a binding a build
// of schema version 3 wrote (no data or draft columns) survives the
// migration to version 4 with no Data and no Drafts, and takes both after.
func TestBinding_W5_SchemaUpgradeFromVersion3KeepsBindings(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	_ = s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `ALTER TABLE imv2_bindings DROP COLUMN data, DROP COLUMN draft_ids, DROP COLUMN draft_handles;
		DELETE FROM imv2_schema_version WHERE version >= 4;
		INSERT INTO imv2_bindings (channel_id, key, provider, label, display_name, account_hint, state, created_ms)
			VALUES ('ch_old', 'room', '', '', 'Room', '', 'connected', 1790000000123);
		INSERT INTO imv2_binding_keys (key, n) VALUES ('room', 1)`); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, url, pgstore.Options{})
	b, ok, err := s.Binding(ctx, "ch_old")
	if err != nil || !ok || b.Key != "room" || b.Target.DisplayName != "Room" || b.Data != nil || b.Drafts != nil {
		t.Fatalf("binding of version 3 = %+v, %v, %v", b, ok, err)
	}
	b.Data, b.Drafts = []byte{0, 0xff}, []state.DraftHandle{{MessageID: "m1", Handle: "$1"}}
	if _, err := s.Bind(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Binding(ctx, "ch_old")
	if err != nil || string(got.Data) != "\x00\xff" || len(got.Drafts) != 1 || got.Drafts[0] != b.Drafts[0] {
		t.Fatalf("binding after the upgrade = %+v, %v", got, err)
	}
}

// TestBinding_W6_ReleaseOnceAcrossReplicas: channels on two replicas
// move from key to key at once, in rounds, so each key's count falls to
// zero exactly once; exactly one change releases each key, whichever
// replica made it (Released is decided under the key row's lock).
func TestBinding_W6_ReleaseOnceAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	stores := []*pgstore.Store{openStore(t, url, pgstore.Options{}), openStore(t, url, pgstore.Options{})}
	const channels, rounds = 8, 6
	key := func(r int) string { return fmt.Sprintf("room-%d", r) }
	var (
		mu       sync.Mutex
		released = map[string]int{}
	)
	run := func(op func(s *pgstore.Store, ch string) (state.BindingChange, error)) {
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for i := range channels {
			wg.Go(func() {
				<-gate
				c, err := op(stores[i%2], fmt.Sprintf("ch_%d", i))
				if err != nil {
					t.Error(err)
				}
				if c.Released {
					mu.Lock()
					released[c.Old.Key]++
					mu.Unlock()
				}
			})
		}
		close(gate)
		wg.Wait()
	}
	for r := range rounds {
		run(func(s *pgstore.Store, ch string) (state.BindingChange, error) {
			return s.Bind(ctx, state.Binding{ChannelID: ch, Key: key(r), State: state.BindingConnected})
		})
	}
	run(func(s *pgstore.Store, ch string) (state.BindingChange, error) { return s.Unbind(ctx, ch) })
	for r := range rounds {
		if released[key(r)] != 1 {
			t.Errorf("key %s released %d times; want 1", key(r), released[key(r)])
		}
	}
	if counts, _ := bindingTables(t, url); len(counts) != 0 {
		t.Fatalf("reference counts after every channel unbound: %v; want none", counts)
	}
}

// TestBinding_W6_UpdateAcrossReplicas: Updates of one binding from two
// replicas lose no change, and an Update racing an Unbind on the other
// replica never binds the channel again (state.BindingUpdater; the
// kit's UpdateBinding and its draft records go through it).
func TestBinding_W6_UpdateAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	stores := []*pgstore.Store{openStore(t, url, pgstore.Options{}), openStore(t, url, pgstore.Options{})}
	count := func(b *state.Binding) error {
		n, err := strconv.Atoi(string(b.Data))
		b.Data = []byte(strconv.Itoa(n + 1))
		return err
	}
	if _, err := stores[0].Bind(ctx, state.Binding{ChannelID: "ch_1", Key: "room", State: state.BindingConnected, Data: []byte("0")}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, found, err := stores[i%2].Update(ctx, "ch_1", count); err != nil || !found {
				t.Errorf("Update = found %v, %v", found, err)
			}
		})
	}
	wg.Wait()
	if b, _, err := stores[1].Binding(ctx, "ch_1"); err != nil || string(b.Data) != strconv.Itoa(n) {
		t.Fatalf("Data after %d Updates on two replicas = %q, %v", n, b.Data, err)
	}

	for round := range 8 {
		ch := fmt.Sprintf("ch_u%d", round)
		if _, err := stores[0].Bind(ctx, state.Binding{ChannelID: ch, Key: "hall", State: state.BindingConnected, Data: []byte("0")}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := stores[1].Unbind(ctx, ch); err != nil {
				t.Error(err)
			}
		})
		for range 3 {
			wg.Go(func() {
				if _, _, err := stores[0].Update(ctx, ch, count); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if _, ok, err := stores[0].Binding(ctx, ch); err != nil || ok {
			t.Fatalf("round %d: %s after an Unbind racing Updates on the other replica: found %v, %v; want unbound", round, ch, ok, err)
		}
	}
	if counts, _ := bindingTables(t, url); counts["hall"] != 0 {
		t.Fatalf("reference count of hall after its channels unbound: %d; want none", counts["hall"])
	}
}
