package pgstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/pgstore"
)

// TestRecord_S8_OtherMessagesDoNotWaitForAHeldRecord: while one Record
// is held inside its transaction, after it has counted its record, the
// Records of other messages commit. A trigger (the test's) holds the
// Record of message "slow" at the delete of its claim until the test
// releases an advisory lock. One other message of ten may share the held
// Record's count row (there are 64); the rest must not wait for it.
func TestRecord_S8_OtherMessagesDoNotWaitForAHeldRecord(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"})
	side, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close(ctx)
	if _, err := side.Exec(ctx, `CREATE FUNCTION test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF OLD.message_id = 'slow'::bytea THEN
				PERFORM pg_advisory_xact_lock(4242);
			END IF;
			RETURN OLD;
		END $$;
		CREATE TRIGGER test_hold AFTER DELETE ON imv2_claims FOR EACH ROW EXECUTE FUNCTION test_hold();
		SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, "ch", "slow", fp, "replica-1", time.Minute); err != nil || c.State != imv2.ClaimAcquired {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	held := make(chan error, 1)
	go func() { held <- s.Record(ctx, "ch", "slow", fp) }()
	bound := time.Now().Add(30 * time.Second) // a guard against a hang
	for {
		var waiting int
		if err := side.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(bound) {
			t.Fatal("the Record of slow never reached the trigger")
		}
	}
	committed := 0
	for i := range 10 {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second) // far above a Record's time on the test's server
		err := s.Record(rctx, "ch", "fast-"+strconv.Itoa(i), fp)
		cancel()
		if err == nil {
			committed++
		}
	}
	if _, err := side.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatalf("the held Record: %v", err)
	}
	if committed < 9 {
		t.Fatalf("%d of 10 Records of other messages committed while one Record was held; want at least 9", committed)
	}
}
