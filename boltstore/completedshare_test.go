package boltstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2/fakeclock"
)

// TestOpen_S6_MigratesLayout1ToShares: a file of layout 1 (records, no
// per-channel index or counts) opens as layout 2 with every record
// indexed and counted by channel, so the shares hold at once: a flood
// into the migrated file evicts its own records, not the victim's. The
// layout-1 file is made by deleting what layout 2 added, as a layout-1
// build never wrote it.
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
		for _, b := range [][]byte{bucketCompletedByChannel, bucketCompletedChannels} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(keyCompletedChannels); err != nil {
			return err
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
