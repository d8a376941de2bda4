package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
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
