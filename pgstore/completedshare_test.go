package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/connid"
	"github.com/xagentkit/imv2/pgstore"
)

// TestRecord_S6_ManyChannelsDiluteOnlyTheirOwnConnector (issue 26): the
// shares are per connector_id first, then per channel. One connector_id
// floods finals over more channels than the cap, alone (Record) and in
// a group commit (recordGroup); another connector_id's records, and a
// record of no connector_id (its own group), all younger than the resend
// horizon, survive, and the flood evicts its own. Shared per channel
// only, the flood's channels made every channel's share 0.
func TestRecord_S6_ManyChannelsDiluteOnlyTheirOwnConnector(t *testing.T) {
	bg := context.Background()
	url := srv.NewDatabase(t)
	const capacity = 12
	s := openStore(t, url, pgstore.Options{CompletedCap: capacity})
	victim, attacker := connid.WithConnectorID(bg, "victim"), connid.WithConnectorID(bg, "attacker")
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"})
	for _, id := range []string{"v1", "v2"} {
		if err := s.Record(victim, "victim", id, fp); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Record(bg, "none", "n1", fp); err != nil {
		t.Fatal(err)
	}
	for i := range 45 {
		if err := s.Record(attacker, fmt.Sprintf("a%d", i%30), fmt.Sprintf("a%d", i), fp); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 8 { // the group commit's statements
		var calls []*pgstore.GroupCall
		for i := range 4 {
			calls = append(calls, &pgstore.GroupCall{Ctx: attacker, Record: true, FP: fp,
				Channel: fmt.Sprintf("g%d", round*4+i), Message: fmt.Sprintf("g%d", round*4+i)})
		}
		s.RunGroup(calls)
		for _, c := range calls {
			if c.Err != nil {
				t.Fatal(c.Err)
			}
		}
	}
	for _, k := range [][2]string{{"victim", "v1"}, {"victim", "v2"}, {"none", "n1"}} {
		if _, ok, err := s.Lookup(bg, k[0], k[1]); err != nil || !ok {
			t.Errorf("%s/%s was evicted by another connector_id's flood (%v)", k[0], k[1], err)
		}
	}
	c, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(bg)
	checkCounts(t, c)
	if st, err := s.Stats(bg); err != nil || st.Completed != capacity {
		t.Fatalf("Stats = %+v, %v; want %d completed, the cap", st, err, capacity)
	}
	var groups int
	if err := c.QueryRow(bg, `SELECT count(*) FROM (SELECT 1 FROM imv2_completed_groups GROUP BY connector_id HAVING sum(channels) > 0) g`).Scan(&groups); err != nil {
		t.Fatal(err)
	}
	if groups != 3 {
		t.Fatalf("%d groups, want 3 (victim, attacker, none)", groups)
	}
	var group []byte
	if err := c.QueryRow(bg, "SELECT connector_id FROM imv2_completed_channels WHERE channel_id = 'victim'").Scan(&group); err != nil || string(group) != "victim" {
		t.Fatalf("channel victim is in group %q (%v)", group, err)
	}
}

// TestRecord_S6_TrimsThatRemoveNothingWriteNothing: under the cap a
// Record's trims remove no record, and then they write no count row:
// the count shard's row is written once per Record that adds a record
// (its increment), alone (recordOne) and in a group (recordGroup), and
// not at all by one that replaces a record. Each write is a row version
// every later sum over the shards reads until it is pruned. A trigger
// counts the writes.
func TestRecord_S6_TrimsThatRemoveNothingWriteNothing(t *testing.T) {
	bg := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{CompletedCap: 1000})
	c, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(bg)
	if _, err := c.Exec(bg, `CREATE TABLE shard_writes (n int);
		CREATE FUNCTION count_shard_write() RETURNS trigger LANGUAGE plpgsql AS
			'BEGIN INSERT INTO shard_writes VALUES (1); RETURN NEW; END';
		CREATE TRIGGER count_shard_write BEFORE UPDATE ON imv2_completed_counts
			FOR EACH ROW EXECUTE FUNCTION count_shard_write()`); err != nil {
		t.Fatal(err)
	}
	writes := func() int {
		var n int
		if err := c.QueryRow(bg, "SELECT count(*) FROM shard_writes").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"})
	if err := s.Record(bg, "ch", "m1", fp); err != nil {
		t.Fatal(err)
	}
	if n := writes(); n != 1 {
		t.Fatalf("a new record: %d writes of its count row; want 1", n)
	}
	if err := s.Record(bg, "ch", "m1", fp); err != nil {
		t.Fatal(err)
	}
	if n := writes(); n != 1 {
		t.Fatalf("a replaced record: %d more writes of the count rows; want 0", n-1)
	}
	var calls []*pgstore.GroupCall
	for i := range 4 {
		calls = append(calls, &pgstore.GroupCall{Ctx: bg, Record: true, FP: fp,
			Channel: fmt.Sprintf("g%d", i), Message: fmt.Sprintf("g%d", i)})
	}
	s.RunGroup(calls)
	for _, c := range calls {
		if c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	if n := writes(); n != 2 {
		t.Fatalf("a group of new records: %d writes of the count rows; want 1", n-1)
	}
}

// TestRecord_S6_TheHogMakesRoomWhenTheOldestAreProtected: when the
// oldest records are all protected (young, their channels within their
// share) and the recording channel is within its share, the room for a
// new record comes from the channel most over its share (trimHog), its
// oldest first, alone (Record) and in a group (recordGroup).
func TestRecord_S6_TheHogMakesRoomWhenTheOldestAreProtected(t *testing.T) {
	bg := context.Background()
	const capacity = 40
	s := openStore(t, srv.NewDatabase(t), pgstore.Options{CompletedCap: capacity})
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"})
	record := func(ch, id string) {
		t.Helper()
		if err := s.Record(bg, ch, id, fp); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 { // the oldest, more than a trim's window of them
		record(fmt.Sprintf("p%d", i), "p")
	}
	for i := range 20 {
		record("hog", fmt.Sprintf("h%d", i))
	}
	record("small", "s0")
	var calls []*pgstore.GroupCall
	for _, ch := range []string{"s1", "s2"} {
		calls = append(calls, &pgstore.GroupCall{Ctx: bg, Record: true, FP: fp, Channel: ch, Message: ch})
	}
	s.RunGroup(calls)
	for _, c := range calls {
		if c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	found := func(ch, id string) bool {
		t.Helper()
		_, ok, err := s.Lookup(bg, ch, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for i := range 3 {
		if found("hog", fmt.Sprintf("h%d", i)) {
			t.Errorf("hog/h%d, of the channel most over its share, kept", i)
		}
	}
	for i := range 20 {
		if !found(fmt.Sprintf("p%d", i), "p") {
			t.Errorf("p%d/p, protected, evicted", i)
		}
	}
	for _, k := range [][2]string{{"hog", "h3"}, {"small", "s0"}, {"s1", "s1"}, {"s2", "s2"}} {
		if !found(k[0], k[1]) {
			t.Errorf("%s/%s evicted", k[0], k[1])
		}
	}
	if st, err := s.Stats(bg); err != nil || st.Completed != capacity {
		t.Fatalf("Stats = %+v, %v; want %d completed, the cap", st, err, capacity)
	}
}
