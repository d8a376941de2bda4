package boltstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2"
)

// TestPending_S6_EarlierFingerprintStillMatches: a pending entry whose ID
// record holds the fingerprint of an earlier encoding (before it left out
// download_url and expires_at) is the same message when added again with
// the same content: no message_id_conflict after an upgrade. Other
// content is still a conflict. Before, a re-Add compared the stored bytes
// only and failed message_id_conflict.
func TestPending_S6_EarlierFingerprintStillMatches(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "p.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := imv2.PendingEntry{ChannelID: "cch_1", Created: time.Unix(1_790_000_000, 0).UTC(), Message: imv2.ChatMessage{
		MessageID: "msg_1", Text: "see file",
		Files: []imv2.File{{Type: imv2.FileFile, FileRef: "file_1", DownloadURL: "/files/refs/file_1?sig=1", ExpiresAt: 1}},
	}}
	if err := s.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	// What the earlier encoding stored: other fingerprint bytes.
	key, err := recordKey(e.ChannelID, e.Message.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketPendingIDs)
		v := append([]byte(nil), ids.Get(key)...)
		for i := 8; i < len(v); i++ {
			v[i] ^= 0xff
		}
		return ids.Put(key, v)
	}); err != nil {
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
	got, err := s.List(ctx, e.ChannelID)
	if err != nil || len(got) != 1 {
		t.Fatalf("List = %d entries, %v; want the one", len(got), err)
	}
}
