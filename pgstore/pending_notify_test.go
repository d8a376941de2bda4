package pgstore_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/pgstore"
)

// TestAdd_S1_ChannelsOwnAddNotifiesNoReplica: the Channel's own Add
// (Store.Add) sends no pending notification; Relay.Send's does. The Add
// commits first, so had it notified, its notification would arrive first.
func TestAdd_S1_ChannelsOwnAddNotifiesNoReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard against a hang
	defer cancel()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN imv2_pending"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"cch_own", "cch_relayed"} {
		if err := s.Register(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Add(ctx, imv2.PendingEntry{ChannelID: "cch_own", Created: time.Now(), Message: imv2.ChatMessage{MessageID: "m1", Text: "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.NewRelay(s).Send(ctx, "cch_relayed", imv2.ChatMessage{MessageID: "m2", Text: "y"}); err != nil {
		t.Fatal(err)
	}
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString([]byte("cch_relayed")); !strings.HasSuffix(n.Payload, " "+want) {
		t.Fatalf("first notification %q; want the relayed Send's (channel %x)", n.Payload, "cch_relayed")
	}
}
