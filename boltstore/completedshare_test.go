package boltstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/connid"
)

// TestOpen_S6_MigratesLayout1ToShares: a file of layout 1 (records, no
// per-channel index or counts) opens as layout 3 with every record
// indexed and counted by channel (in the group of none), so the shares
// hold at once: a flood into the migrated file evicts its own records,
// not the victim's. The layout-1 file is made by deleting what layouts 2
// and 3 added, as a layout-1 build never wrote it.
func TestOpen_S6_MigratesLayout1ToShares(t *testing.T) {
	clk := fakeclock.New(t0)
	path := filepath.Join(t.TempDir(), "imv2.db")
	opts := Options{CompletedCap: 10, Clock: clk}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	record(t, s, "victim", "v1")
	for i := range 4 {
		record(t, s, "flood", fmt.Sprintf("f%d", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketCompletedByChannel, bucketCompletedChannels, bucketCompletedGroups} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		for _, k := range [][]byte{keyCompletedChannels, keyCompletedGroups} {
			if err := meta.Delete(k); err != nil {
				return err
			}
		}
		return meta.Put(keyLayoutVersion, u64(1))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, opts)
	if err != nil {
		t.Fatalf("Open of layout 1: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	checkConsistent(t, s)
	for i := 4; i < 40; i++ {
		record(t, s, "flood", fmt.Sprintf("f%d", i))
	}
	checkConsistent(t, s)
	if _, ok, _ := s.Lookup(context.Background(), "victim", "v1"); !ok {
		t.Fatal("the victim's record was evicted by the flood after the migration")
	}
	if st := stats(t, s); st.Completed != 10 {
		t.Fatalf("%d records, want the cap, 10", st.Completed)
	}
}

// TestRecord_S6_ShareFilledFromTheHog: a channel below its share
// recording into a full store whose oldest record is protected takes the
// room from the channel holding the most, and the indexes stay
// consistent through eviction, handover, drop and sweep.
func TestRecord_S6_ShareFilledFromTheHog(t *testing.T) {
	clk := fakeclock.New(t0)
	s := openTest(t, Options{CompletedCap: 6, Clock: clk})
	ctx := context.Background()
	record(t, s, "a", "a1") // oldest, protected
	for i := range 5 {
		record(t, s, "hog", fmt.Sprintf("h%d", i))
	}
	record(t, s, "b", "b1") // share 6/3 = 2: b is below it; hog holds 5
	for _, c := range []struct {
		ch, id string
		want   bool
	}{{"a", "a1", true}, {"b", "b1", true}, {"hog", "h0", false}, {"hog", "h1", true}} {
		if _, ok, _ := s.Lookup(ctx, c.ch, c.id); ok != c.want {
			t.Errorf("%s/%s found %v, want %v", c.ch, c.id, ok, c.want)
		}
	}
	checkConsistent(t, s)
	if err := s.Handover(ctx, "hog", "c"); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, s)
	if _, ok, _ := s.Lookup(ctx, "a", "a1"); !ok {
		t.Error("a handover evicted a's protected record")
	}
	if err := s.DropChannel(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, s)
	clk.Advance(25 * time.Hour)
	if _, err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, s)
	if st := stats(t, s); st.Completed != 0 {
		t.Fatalf("%d records after the sweep", st.Completed)
	}
}

// TestRecord_S6_ManyChannelsDiluteOnlyTheirOwnConnector: the shares are
// per connector_id first (the one the Record's context carries), then
// per channel. One connector_id's 30 channels flood a store of 12; the
// victim connector_id's records (2 of each of its 2 channels) and those
// of a channel of none, younger than the resend horizon, stay: three
// groups of 4 each. A Record without a connector_id (the kit's) into the
// victim's channel stays in the victim's group, and a channel first
// recorded without one moves to the victim's on the victim's Record.
// With shares per channel only, 33 channels made every share 0 and the
// flood took the victim's records.
func TestRecord_S6_ManyChannelsDiluteOnlyTheirOwnConnector(t *testing.T) {
	clk := fakeclock.New(t0)
	s := openTest(t, Options{CompletedCap: 12, Clock: clk})
	bg := context.Background()
	victim, attacker := connid.WithConnectorID(bg, "victim"), connid.WithConnectorID(bg, "attacker")
	for _, id := range []string{"v1", "v2"} {
		if err := s.Record(victim, "victim", id, imv2.Fingerprint{1}); err != nil {
			t.Fatal(err)
		}
	}
	record(t, s, "victim", "v3") // no connector_id: the channel's group
	record(t, s, "none", "n1")
	record(t, s, "kit", "k1") // no connector_id, then the Channel's: moved
	if err := s.Record(victim, "kit", "k2", imv2.Fingerprint{1}); err != nil {
		t.Fatal(err)
	}
	for i := range 90 {
		clk.Advance(time.Second) // well inside the resend horizon
		if err := s.Record(attacker, fmt.Sprintf("a%d", i%30), fmt.Sprintf("a%d", i), imv2.Fingerprint{1}); err != nil {
			t.Fatal(err)
		}
	}
	checkConsistent(t, s)
	for _, k := range [][2]string{{"victim", "v2"}, {"victim", "v3"}, {"kit", "k1"}, {"kit", "k2"}, {"none", "n1"}} {
		if _, ok, _ := s.Lookup(bg, k[0], k[1]); !ok {
			t.Errorf("%s/%s was evicted by another connector_id's flood", k[0], k[1])
		}
	}
	if st := stats(t, s); st.Completed != 12 {
		t.Fatalf("%d records, want the cap, 12", st.Completed)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		if n := getU64(tx.Bucket(bucketMeta), keyCompletedGroups); n != 3 {
			return fmt.Errorf("%d groups, want 3 (victim, attacker, none)", n)
		}
		for _, ch := range []string{"victim", "kit"} {
			if v := tx.Bucket(bucketCompletedChannels).Get([]byte(ch)); string(v[8:]) != "victim" {
				return fmt.Errorf("channel %s is in group %q", ch, v[8:])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The counters stay in step through a handover (to joins from's
	// group, which then holds two channels sharing its 4), a drop and a
	// sweep.
	if err := s.Handover(bg, "victim", "victim2"); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, s)
	err = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketCompletedChannels).Get([]byte("victim2")); string(v[8:]) != "victim" {
			return fmt.Errorf("handed over to channel victim2, in group %q", v[8:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Lookup(bg, "victim2", "v3"); !ok {
		t.Error("the handover's newest copy went")
	}
	if err := s.DropChannel(bg, "victim"); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, s)
	clk.Advance(25 * time.Hour)
	if _, err := s.Sweep(bg); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, s)
}

// TestOpen_S6_MigratesLayout2ToGroups: a file of layout 2 (shares per
// channel, no groups) opens as layout 3 with its channels in the group of
// none, counted, so another connector_id's flood of many channels then
// leaves the migrated records their group's share.
func TestOpen_S6_MigratesLayout2ToGroups(t *testing.T) {
	clk := fakeclock.New(t0)
	path := filepath.Join(t.TempDir(), "imv2.db")
	opts := Options{CompletedCap: 10, Clock: clk}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	record(t, s, "old1", "o1")
	record(t, s, "old2", "o2")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketCompletedGroups); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(keyCompletedGroups); err != nil {
			return err
		}
		return meta.Put(keyLayoutVersion, u64(2))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, opts)
	if err != nil {
		t.Fatalf("Open of layout 2: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	checkConsistent(t, s)
	attacker := connid.WithConnectorID(context.Background(), "attacker")
	for i := range 40 {
		if err := s.Record(attacker, fmt.Sprintf("a%d", i%20), fmt.Sprintf("a%d", i), imv2.Fingerprint{1}); err != nil {
			t.Fatal(err)
		}
	}
	checkConsistent(t, s)
	for _, k := range [][2]string{{"old1", "o1"}, {"old2", "o2"}} {
		if _, ok, _ := s.Lookup(context.Background(), k[0], k[1]); !ok {
			t.Errorf("%s/%s was evicted by the flood after the migration", k[0], k[1])
		}
	}
}

// TestOpen_W13_MigratesLayout3ToResults: a file of layout 3 (no
// completed_results) opens as layout 4 with its records as they were and
// none with a result; a result recorded then survives a reopen and goes
// with its record.
func TestOpen_W13_MigratesLayout3ToResults(t *testing.T) {
	clk := fakeclock.New(t0)
	path := filepath.Join(t.TempDir(), "imv2.db")
	opts := Options{CompletedCap: 10, Clock: clk}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	record(t, s, "old1", "o1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketCompletedResults); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyLayoutVersion, u64(3))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, opts)
	if err != nil {
		t.Fatalf("Open of layout 3: %v", err)
	}
	checkConsistent(t, s)
	ctx := context.Background()
	if _, r, ok, err := s.LookupResult(ctx, "old1", "o1"); err != nil || !ok || r != nil {
		t.Fatalf("the migrated record: %q, %v, %v", r, ok, err)
	}
	if err := s.RecordResult(ctx, "new", "t", imv2.Fingerprint{1}, []byte("res")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, r, ok, err := s.LookupResult(ctx, "new", "t"); err != nil || !ok || string(r) != "res" {
		t.Fatalf("a result after the migration and a reopen: %q, %v, %v", r, ok, err)
	}
	if err := s.DropChannel(ctx, "new"); err != nil {
		t.Fatal(err)
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketCompletedResults).Stats().KeyN; n != 0 {
			return fmt.Errorf("%d results left after their records went", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
