package pgstore_test

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/pendingcodec"
	"github.com/xagentkit/imv2/pgstore"
)

// insertRow writes a pending row as the stores' SQL does, with msg as its
// message column.
func insertRow(t *testing.T, c *pgx.Conn, e imv2.PendingEntry, msg []byte) {
	t.Helper()
	fp := imv2.FingerprintOf(&e.Message)
	_, err := c.Exec(context.Background(), `INSERT INTO imv2_pending (channel_id, message_id, fingerprint, created_s, created_ns, message)
		VALUES ($1, $2, $3, $4, $5, $6)`, []byte(e.ChannelID), []byte(e.Message.MessageID), fp[:], e.Created.Unix(), e.Created.Nanosecond(), msg)
	if err != nil {
		t.Fatal(err)
	}
}

// TestPending_S1_GobRowsOfEarlierBuildsAreRead: a row written the way
// builds before the shared encoding wrote it (the message gob-encoded) is
// listed, in order, beside rows in the new encoding, and is removed and
// deduplicated like any other.
func TestPending_S1_GobRowsOfEarlierBuildsAreRead(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	created := time.Date(2030, 1, 1, 0, 0, 1, 5, time.UTC)
	old := imv2.PendingEntry{ChannelID: "ch", Created: created, Message: imv2.ChatMessage{
		MessageID: "m-old", CreatedAt: 1_893_456_001_000, Text: "written by gob",
		Files: []imv2.File{{Type: imv2.FileFile, FileRef: "f1", Filename: "a.pdf", ByteSize: 3, DownloadURL: "/files/refs/f1"}},
	}}
	var gobbed bytes.Buffer
	if err := gob.NewEncoder(&gobbed).Encode(&old.Message); err != nil {
		t.Fatal(err)
	}
	insertRow(t, c, old, gobbed.Bytes())
	fresh := imv2.PendingEntry{ChannelID: "ch", Created: created.Add(time.Second), Message: imv2.ChatMessage{MessageID: "m-new", Text: "written now"}}
	if err := s.Add(ctx, fresh); err != nil {
		t.Fatal(err)
	}

	var raw []byte
	if err := c.QueryRow(ctx, "SELECT message FROM imv2_pending WHERE message_id = $1", []byte("m-new")).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if want := append([]byte{0, pendingcodec.Version}, pendingcodec.Append(nil, &fresh)...); !bytes.Equal(raw, want) {
		t.Fatalf("new row's message column is %x, want %x", raw, want)
	}

	got, err := s.List(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	if want := []imv2.PendingEntry{old, fresh}; !reflect.DeepEqual(got, want) {
		t.Fatalf("List:\n got %+v\nwant %+v", got, want)
	}
	if err := s.Add(ctx, old); err != nil { // the same content again is no change
		t.Fatalf("re-Add of the gob row's entry: %v", err)
	}
	if err := s.Remove(ctx, "ch", "m-old"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.List(ctx, "ch"); err != nil || len(got) != 1 || got[0].Message.MessageID != "m-new" {
		t.Fatalf("List after removing the gob row: %+v, %v", got, err)
	}
}

// TestPending_S1_UnreadableRowsAreErrors: a damaged row in the new
// encoding, and one of an encoding version this build does not know, fail
// List with ErrCorrupt instead of being skipped or misread.
func TestPending_S1_UnreadableRowsAreErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		msg  []byte
	}{
		{"truncated", []byte{0, pendingcodec.Version, 1, 'm', 0, 0}},
		{"a newer version", append([]byte{0, pendingcodec.Version + 1}, pendingcodec.Append(nil, &imv2.PendingEntry{Message: imv2.ChatMessage{MessageID: "m"}})...)},
		{"a bare mark", []byte{0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := srv.NewDatabase(t)
			s := openStore(t, url, pgstore.Options{})
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			insertRow(t, conn, imv2.PendingEntry{ChannelID: "ch", Message: imv2.ChatMessage{MessageID: "m"}}, c.msg)
			if _, err := s.List(ctx, "ch"); !errors.Is(err, pendingcodec.ErrCorrupt) {
				t.Fatalf("List: %v, want ErrCorrupt", err)
			}
		})
	}
}
