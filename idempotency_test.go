package imv2

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/xagentkit/imv2/fakeclock"
)

func fpMessage() ChatMessage {
	return ChatMessage{
		MessageID: "msg_1",
		Text:      "hello",
		Files: []File{
			{Type: FileImage, FileRef: "f1", Filename: "a.png", MimeType: "image/png", ByteSize: 10, ExpiresAt: 5, DownloadURL: "/files/refs/f1"},
			{Type: FileFile, FileRef: "f2", Filename: "b.pdf", MimeType: "application/pdf", ByteSize: 20, ExpiresAt: 6, DownloadURL: "/files/refs/f2"},
		},
		CreatedAt: 100,
	}
}

func TestFingerprintOf_S6_TextAndFileList(t *testing.T) {
	base := fpMessage()
	fp := FingerprintOf(&base)
	same := fpMessage()
	if FingerprintOf(&same) != fp {
		t.Fatal("equal content, different fingerprint")
	}
	same.CreatedAt = 999
	if FingerprintOf(&same) != fp {
		t.Error("created_at changed the fingerprint; a resend may stamp a new time")
	}
	// S6: profile §9 names the text and the file list; a freshly signed URL or a
	// new expiry is the same message.
	same.Files[0].ExpiresAt = 7
	same.Files[0].DownloadURL = "/files/refs/resigned?sig=2"
	if FingerprintOf(&same) != fp {
		t.Error("download_url or expires_at changed the fingerprint; a resend with a freshly signed URL is the same message")
	}
	changes := map[string]func(m *ChatMessage){
		"text":               func(m *ChatMessage) { m.Text = "hello!" },
		"type":               func(m *ChatMessage) { m.Files[1].Type = FileVideo },
		"file_ref":           func(m *ChatMessage) { m.Files[1].FileRef = "f3" },
		"filename":           func(m *ChatMessage) { m.Files[0].Filename = "c.png" },
		"mime_type":          func(m *ChatMessage) { m.Files[0].MimeType = "image/jpeg" },
		"byte_size":          func(m *ChatMessage) { m.Files[0].ByteSize = 11 },
		"file dropped":       func(m *ChatMessage) { m.Files = m.Files[:1] },
		"files reordered":    func(m *ChatMessage) { m.Files[0], m.Files[1] = m.Files[1], m.Files[0] },
		"text moved to file": func(m *ChatMessage) { m.Text = ""; m.Files[0].FileRef = "hellof1" },
		"boundary shift":     func(m *ChatMessage) { m.Files[0].Filename = "a.pn"; m.Files[0].MimeType = "gimage/png" },
	}
	for name, change := range changes {
		m := fpMessage()
		change(&m)
		if FingerprintOf(&m) == fp {
			t.Errorf("%s changed, fingerprint did not", name)
		}
	}
}

func TestMemoryCompletedStore_S4_Cap(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.New(time.Unix(1_790_000_000, 0))
	s := newMemoryCompletedStore(3, time.Hour, clk)
	fp := Fingerprint{1}
	for i := range 5 {
		if err := s.Record(ctx, "cch_1", fmt.Sprintf("m%d", i), fp); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want the cap 3", s.Len())
	}
	for i := range 5 {
		_, ok, err := s.Lookup(ctx, "cch_1", fmt.Sprintf("m%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if want := i >= 2; ok != want {
			t.Errorf("m%d: found=%v, want %v (oldest go first)", i, ok, want)
		}
	}
}

func TestMemoryCompletedStore_S6_TTL(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.New(time.Unix(1_790_000_000, 0))
	s := newMemoryCompletedStore(10, time.Minute, clk)
	fp := Fingerprint{7}
	if err := s.Record(ctx, "cch_1", "old", fp); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	if err := s.Record(ctx, "cch_1", "new", fp); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := s.Lookup(ctx, "cch_1", "old"); !ok || got != fp {
		t.Fatal("a record inside its TTL is gone")
	}
	if _, ok, _ := s.Lookup(ctx, "cch_2", "old"); ok {
		t.Fatal("records are per channel")
	}
	clk.Advance(30 * time.Second)
	if _, ok, _ := s.Lookup(ctx, "cch_1", "old"); ok {
		t.Error("a record past its TTL is still found")
	}
	if _, ok, _ := s.Lookup(ctx, "cch_1", "new"); !ok {
		t.Error("the younger record expired early")
	}
	if err := s.Record(ctx, "cch_1", "newest", fp); err != nil { // sweeps
		t.Fatal(err)
	}
	if s.Len() != 2 {
		t.Errorf("Len = %d after the sweep, want 2", s.Len())
	}
}

func TestMemoryCompletedStore_S7_DropChannel(t *testing.T) {
	ctx := context.Background()
	s := newMemoryCompletedStore(0, 0, nil)
	for _, ch := range []string{"a", "b"} {
		if err := s.Record(ctx, ch, "m", Fingerprint{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DropChannel(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Lookup(ctx, "a", "m"); ok {
		t.Error("dropped channel still has records")
	}
	if _, ok, _ := s.Lookup(ctx, "b", "m"); !ok {
		t.Error("another channel lost its records")
	}
}

func pendingEntry(ch, id, text string) PendingEntry {
	return PendingEntry{ChannelID: ch, Message: ChatMessage{MessageID: id, Text: text}, Created: time.Unix(1, 0)}
}

func TestMemoryPendingStore_S1_CapIsBackpressure(t *testing.T) {
	ctx := context.Background()
	s := newMemoryPendingStore(2)
	for _, id := range []string{"m1", "m2"} {
		if err := s.Add(ctx, pendingEntry("cch_1", id, id)); err != nil {
			t.Fatal(err)
		}
	}
	err := s.Add(ctx, pendingEntry("cch_1", "m3", "m3"))
	if e := AsError(err, ""); e == nil || e.Code != CodePendingFull {
		t.Fatalf("Add on a full channel = %v, want pending_full", err)
	}
	if s.Len("cch_1") != 2 {
		t.Error("a full store dropped or added an entry")
	}
	if err := s.Add(ctx, pendingEntry("cch_2", "m3", "m3")); err != nil {
		t.Errorf("the cap is per channel: %v", err)
	}
	if err := s.Add(ctx, pendingEntry("cch_1", "m1", "m1")); err != nil {
		t.Errorf("re-adding the same pending message must succeed even when full: %v", err)
	}
	if err := s.Remove(ctx, "cch_1", "m1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, pendingEntry("cch_1", "m3", "m3")); err != nil {
		t.Errorf("room after Remove: %v", err)
	}
	list, err := s.List(ctx, "cch_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Message.MessageID != "m2" || list[1].Message.MessageID != "m3" {
		t.Errorf("List = %+v, want m2, m3 oldest first", list)
	}
}

func TestMemoryPendingStore_M2_Conflict(t *testing.T) {
	ctx := context.Background()
	s := newMemoryPendingStore(0)
	if err := s.Add(ctx, pendingEntry("cch_1", "m1", "hello")); err != nil {
		t.Fatal(err)
	}
	err := s.Add(ctx, pendingEntry("cch_1", "m1", "other text"))
	if e := AsError(err, ""); e == nil || e.Code != CodeMessageIDConflict {
		t.Fatalf("same message_id, other content: %v, want message_id_conflict", err)
	}
	list, _ := s.List(ctx, "cch_1")
	if len(list) != 1 || list[0].Message.Text != "hello" {
		t.Errorf("the conflict replaced the pending message: %+v", list)
	}
	if err := s.Remove(ctx, "cch_1", "m1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, "cch_1", "m1"); err != nil {
		t.Errorf("Remove of an absent message: %v", err)
	}
	if s.Len("cch_1") != 0 {
		t.Error("not removed")
	}
	if l, _ := s.List(ctx, "nope"); l != nil {
		t.Error("List of an unknown channel")
	}
}
