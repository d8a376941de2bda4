package pgstore_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/connid"
	"github.com/xagentkit/imv2/pgstore"
)

// TestSchema_ReplicasStartingAtOnceMigrateOnce: several stores opened at
// the same moment on an empty database all succeed, and the schema is
// created once, at the current version.
func TestSchema_ReplicasStartingAtOnceMigrateOnce(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	gate := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-gate
			s, err := pgstore.Open(ctx, url, pgstore.Options{})
			if err == nil {
				_ = s.Close()
			}
			errs[i] = err
		})
	}
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n, v int
	if err := c.QueryRow(ctx, "SELECT count(*), max(version) FROM imv2_schema_version").Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != pgstore.SchemaVersion || v != pgstore.SchemaVersion {
		t.Fatalf("schema_version has %d rows up to %d, want %d rows up to %d", n, v, pgstore.SchemaVersion, pgstore.SchemaVersion)
	}
}

// TestSchema_NewerDatabaseRefused: a database migrated by a newer build is
// refused with a clear error, not read with the wrong meaning.
func TestSchema_NewerDatabaseRefused(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	_ = s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "INSERT INTO imv2_schema_version (version) VALUES (99)"); err != nil {
		t.Fatal(err)
	}
	_, err = pgstore.Open(ctx, url, pgstore.Options{})
	if err == nil || !strings.Contains(err.Error(), "schema version 99 is newer") {
		t.Fatalf("Open of a newer schema: %v, want a version error", err)
	}
}

// TestSchema_UpgradeFromVersion4KeepsCompletedCount: a database of schema
// version 4 (one completed count row) migrates to the count split over
// shards with its count kept, so the cap still counts the old records.
func TestSchema_UpgradeFromVersion4KeepsCompletedCount(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	opts := pgstore.Options{CompletedCap: 3}
	s := openStore(t, url, opts)
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"})
	for _, id := range []string{"m1", "m2", "m3"} {
		if err := s.Record(ctx, "ch", id, fp); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `DROP TABLE imv2_completed_counts;
		CREATE TABLE imv2_completed_count (id int PRIMARY KEY CHECK (id = 1), n bigint NOT NULL);
		INSERT INTO imv2_completed_count VALUES (1, 3);
		DELETE FROM imv2_schema_version WHERE version >= 5`); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, url, opts)
	if st, err := s.Stats(ctx); err != nil || st.Completed != 3 {
		t.Fatalf("after the upgrade Stats = %+v, %v; want 3 completed", st, err)
	}
	if err := s.Record(ctx, "ch", "m4", fp); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Lookup(ctx, "ch", "m1"); err != nil || ok {
		t.Fatalf("the oldest record after a Record at the cap: found=%v, %v; want evicted", ok, err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Completed != 3 {
		t.Fatalf("Stats = %+v, %v; want 3 completed", st, err)
	}
}

// TestSchema_UpgradeFromVersion5CountsChannels: a database of schema
// version 5 (records, no count per channel) migrates to version 6 with
// every channel's records counted, so the shares hold at once: a flood
// into the migrated database evicts its own records, not the victim's.
// The version-5 database is made by dropping what version 6 added.
func TestSchema_UpgradeFromVersion5CountsChannels(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	opts := pgstore.Options{CompletedCap: 10}
	s := openStore(t, url, opts)
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"})
	record := func(ch, id string) {
		t.Helper()
		if err := s.Record(ctx, ch, id, fp); err != nil {
			t.Fatal(err)
		}
	}
	record("victim", "v1")
	for i := range 4 {
		record("flood", "f"+strconv.Itoa(i))
	}
	_ = s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `DROP TABLE imv2_completed_channels;
		DROP INDEX imv2_completed_channel_order;
		ALTER TABLE imv2_completed_counts DROP COLUMN channels;
		DELETE FROM imv2_schema_version WHERE version >= 6`); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, url, opts)
	checkCounts(t, c)
	for i := 4; i < 40; i++ {
		record("flood", "f"+strconv.Itoa(i))
	}
	checkCounts(t, c)
	if _, ok, err := s.Lookup(ctx, "victim", "v1"); err != nil || !ok {
		t.Fatalf("the victim's record after a flood into the migrated database: found=%v, %v", ok, err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Completed != 10 {
		t.Fatalf("Stats = %+v, %v; want 10 completed, the cap", st, err)
	}
}

// TestSchema_UpgradeFromVersion6GroupsChannels: a database of schema
// version 6 (channels counted, no groups) migrates to version 7 with every
// channel in the group of no connector_id and the groups counted, so the
// two-level shares hold at once: a flood of another connector_id over
// more channels than the cap into the migrated database evicts its own
// records, not the old ones. The version-6 database is made by dropping
// what version 7 added.
func TestSchema_UpgradeFromVersion6GroupsChannels(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	opts := pgstore.Options{CompletedCap: 10}
	s := openStore(t, url, opts)
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"})
	record := func(ctx context.Context, ch, id string) {
		t.Helper()
		if err := s.Record(ctx, ch, id, fp); err != nil {
			t.Fatal(err)
		}
	}
	record(connid.WithConnectorID(ctx, "victim"), "victim", "v1")
	record(ctx, "victim", "v2")
	record(ctx, "old", "o1")
	_ = s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `DROP TABLE imv2_completed_groups;
		ALTER TABLE imv2_completed_channels DROP COLUMN connector_id;
		DELETE FROM imv2_schema_version WHERE version >= 7`); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, url, opts)
	checkCounts(t, c)
	var none int
	if err := c.QueryRow(ctx, `SELECT sum(channels) FROM imv2_completed_groups WHERE connector_id = '\x'`).Scan(&none); err != nil || none != 2 {
		t.Fatalf("the group of none holds %d channels (%v), want 2", none, err)
	}
	attacker := connid.WithConnectorID(ctx, "attacker")
	for i := range 40 {
		record(attacker, "flood"+strconv.Itoa(i%20), "f"+strconv.Itoa(i))
	}
	checkCounts(t, c)
	for _, k := range [][2]string{{"victim", "v1"}, {"victim", "v2"}, {"old", "o1"}} {
		if _, ok, err := s.Lookup(ctx, k[0], k[1]); err != nil || !ok {
			t.Errorf("%s/%s after a flood into the migrated database: found=%v, %v", k[0], k[1], ok, err)
		}
	}
	if st, err := s.Stats(ctx); err != nil || st.Completed != 10 {
		t.Fatalf("Stats = %+v, %v; want 10 completed, the cap", st, err)
	}
}

// checkCounts verifies that the counts of completed records agree with
// the records: the total, each channel's, and the channels holding some.
func checkCounts(t *testing.T, c *pgx.Conn) {
	t.Helper()
	var bad, total, counted, channels, rows int
	err := c.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM imv2_completed_channels ch FULL JOIN
			(SELECT channel_id, count(*) AS k FROM imv2_completed GROUP BY channel_id) r USING (channel_id)
			WHERE ch.n IS DISTINCT FROM r.k),
		(SELECT count(*) FROM imv2_completed), (SELECT sum(n) FROM imv2_completed_counts),
		(SELECT sum(channels) FROM imv2_completed_counts), (SELECT count(*) FROM imv2_completed_channels)`).
		Scan(&bad, &total, &counted, &channels, &rows)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 || total != counted || channels != rows {
		t.Fatalf("%d channels miscounted; %d records, %d counted; %d channel rows, %d counted", bad, total, counted, rows, channels)
	}
	var badGroups int
	err = c.QueryRow(context.Background(), `SELECT count(*) FROM
		(SELECT connector_id, sum(channels) AS k FROM imv2_completed_groups GROUP BY connector_id HAVING sum(channels) <> 0) g FULL JOIN
		(SELECT connector_id, count(*) AS k FROM imv2_completed_channels GROUP BY connector_id) ch USING (connector_id)
		WHERE g.k IS DISTINCT FROM ch.k`).Scan(&badGroups)
	if err != nil {
		t.Fatal(err)
	}
	if badGroups != 0 {
		t.Fatalf("%d groups' channels miscounted", badGroups)
	}
}

// TestSchema_UpgradeFromVersion7KeepsResults: a database of schema
// version 7 (no result column) migrates to version 8 with its records as
// they were and none with a result; a result recorded then is kept with
// its record, and goes with it. The version-7 database is made by
// dropping what version 8 added.
func TestSchema_UpgradeFromVersion7KeepsResults(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	fp := imv2.Fingerprint{1}
	if err := s.Record(ctx, "old", "o1", fp); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `ALTER TABLE imv2_completed DROP COLUMN result;
		DELETE FROM imv2_schema_version WHERE version >= 8`); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, url, pgstore.Options{})
	if got, r, ok, err := s.LookupResult(ctx, "old", "o1"); err != nil || !ok || r != nil || got != fp {
		t.Fatalf("the migrated record: %q, %v, %v", r, ok, err)
	}
	if err := s.RecordResult(ctx, "new", "t", fp, []byte(`{"id":"m_9"}`)); err != nil {
		t.Fatal(err)
	}
	if _, r, ok, err := s.LookupResult(ctx, "new", "t"); err != nil || !ok || string(r) != `{"id":"m_9"}` {
		t.Fatalf("a result after the migration: %q, %v, %v", r, ok, err)
	}
	checkCounts(t, c)
}

// TestSchema_UpgradeFromVersion9AddsTheXAgentChannels: a database of
// schema version 9 (no xAgent channel store) migrates to version 10 with
// its data as it was and an empty channel store, which then works; and
// version 10 run again over its own tables (its version row gone) keeps
// what they hold. The version-9 database is made by dropping what
// version 10 added.
func TestSchema_UpgradeFromVersion9AddsTheXAgentChannels(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	m := imv2.PendingEntry{ChannelID: "cch_old", Message: imv2.ChatMessage{MessageID: "m1", Text: "owed"}, Created: time.Unix(1_790_000_000, 0)}
	if err := s.Add(ctx, m); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `DROP TABLE imv2_xagent_channels; DROP TABLE imv2_xagent_connector;
		DELETE FROM imv2_schema_version WHERE version >= 10`); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, url, pgstore.Options{})
	if l, err := s.List(ctx, "cch_old"); err != nil || len(l) != 1 || l[0].Message.Text != "owed" {
		t.Fatalf("the pending entry of version 9 after the upgrade: %+v, %v", l, err)
	}
	if id, err := s.ConnectorID(ctx); err != nil || id != "" {
		t.Fatalf("ConnectorID after the upgrade = %q, %v; want empty", id, err)
	}
	if err := s.SetConnectorID(ctx, "conn_1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"cch_old", "cch_new"} {
		if err := s.AddChannel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	if _, err := c.Exec(ctx, `DELETE FROM imv2_schema_version WHERE version >= 10`); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, url, pgstore.Options{})
	if id, err := s.ConnectorID(ctx); err != nil || id != "conn_1" {
		t.Fatalf("ConnectorID after version 10 ran again = %q, %v", id, err)
	}
	if ids, err := s.ChannelIDs(ctx); err != nil || !slices.Equal(ids, []string{"cch_old", "cch_new"}) {
		t.Fatalf("ChannelIDs after version 10 ran again = %q, %v", ids, err)
	}
}
