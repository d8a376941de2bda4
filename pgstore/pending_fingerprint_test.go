package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/pgstore"
)

// TestPending_S6_EarlierFingerprintStillMatches: a pending row whose
// fingerprint column holds an earlier encoding's (before it left out
// download_url and expires_at) is the same message when added again with
// the same content: no message_id_conflict after an upgrade. Other
// content is still a conflict. Before, a re-Add compared the column only.
func TestPending_S6_EarlierFingerprintStillMatches(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	e := imv2.PendingEntry{ChannelID: "cch_1", Created: time.Unix(1_790_000_000, 0).UTC(), Message: imv2.ChatMessage{
		MessageID: "msg_1", Text: "see file",
		Files: []imv2.File{{Type: imv2.FileFile, FileRef: "file_1", DownloadURL: "/files/refs/file_1?sig=1", ExpiresAt: 1}},
	}}
	if err := s.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// What the earlier encoding stored: other fingerprint bytes.
	if _, err := c.Exec(ctx, "UPDATE imv2_pending SET fingerprint = $1", make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, e); err != nil {
		t.Fatalf("S6: the same message added again after the encoding changed: %v", err)
	}
	other := e
	other.Message.Text = "another text"
	if err := s.Add(ctx, other); imv2.AsError(err, "").Code != imv2.CodeMessageIDConflict {
		t.Fatalf("other content: %v, want message_id_conflict", err)
	}
}
