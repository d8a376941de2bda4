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
// Records of other messages of other channels commit. (Records of one
// channel wait for each other on its count row, completedshare.go: a
// Channel delivers its messages one at a time.) A trigger (the test's) holds the
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
		err := s.Record(rctx, "ch-"+strconv.Itoa(i), "fast", fp)
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

// TestRecord_S6_ConcurrentFloodKeepsCountsAndTheVictim: eight writers
// flood sixteen channels at once past the cap, with a Handover and a
// DropChannel among them; no Record fails (no deadlock between the
// trims), the counts agree with the records afterwards, the victim's
// record stays and the table holds at most the cap plus one record per
// writer.
func TestRecord_S6_ConcurrentFloodKeepsCountsAndTheVictim(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	const capacity = 40
	s := openStore(t, url, pgstore.Options{CompletedCap: capacity})
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"})
	if err := s.Record(ctx, "victim", "v1", fp); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			var err error
			for i := 0; i < 40 && err == nil; i++ {
				ch := "flood-" + strconv.Itoa((w*40+i)%16)
				err = s.Record(ctx, ch, strconv.Itoa(w)+"-"+strconv.Itoa(i), fp)
				switch {
				case err == nil && w == 0 && i == 20:
					err = s.Handover(ctx, "flood-3", "flood-new")
				case err == nil && w == 1 && i == 20:
					err = s.DropChannel(ctx, "flood-5")
				}
			}
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	checkCounts(t, c)
	if _, ok, err := s.Lookup(ctx, "victim", "v1"); err != nil || !ok {
		t.Fatalf("the victim's record: found=%v, %v", ok, err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Completed > capacity+writers {
		t.Fatalf("Stats = %+v, %v; want at most %d completed", st, err, capacity+writers)
	}
}
