package pendingcodec

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/xagentkit/imv2"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func genEntry() *rapid.Generator[imv2.PendingEntry] {
	str := rapid.StringN(0, 40, -1)
	return rapid.Custom(func(t *rapid.T) imv2.PendingEntry {
		e := imv2.PendingEntry{
			ChannelID: "ch",
			Message: imv2.ChatMessage{
				MessageID: rapid.StringN(1, imv2.MaxIDBytes, imv2.MaxIDBytes).Draw(t, "id"),
				Text:      rapid.String().Draw(t, "text"),
				CreatedAt: rapid.Int64().Draw(t, "created_at"),
			},
			Created: time.Unix(rapid.Int64Range(-62135596800, 1<<40).Draw(t, "sec"), rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")).UTC(),
		}
		for range rapid.IntRange(0, 4).Draw(t, "files") {
			e.Message.Files = append(e.Message.Files, imv2.File{
				Type: imv2.FileType(str.Draw(t, "type")), FileRef: str.Draw(t, "ref"), Filename: str.Draw(t, "name"),
				MimeType: str.Draw(t, "mime"), ByteSize: rapid.Int64().Draw(t, "size"),
				ExpiresAt: rapid.Int64().Draw(t, "exp"), DownloadURL: str.Draw(t, "url"),
			})
		}
		return e
	})
}

func TestEncoding_RoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEntry().Draw(t, "entry")
		b := Append(nil, &e)
		got, err := Decode("ch", b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, e)
		}
		// Any strict prefix, and any trailing byte, is corrupt.
		cut := rapid.IntRange(0, len(b)-1).Draw(t, "cut")
		if _, err := Decode("ch", b[:cut]); err != ErrCorrupt {
			t.Fatalf("decode of %d of %d bytes: %v, want ErrCorrupt", cut, len(b), err)
		}
		if _, err := Decode("ch", append(b, 0)); err != ErrCorrupt {
			t.Fatalf("decode with a trailing byte: %v, want ErrCorrupt", err)
		}
	})
}

func FuzzDecode(f *testing.F) {
	e := imv2.PendingEntry{Message: imv2.ChatMessage{MessageID: "m", Text: "hi", Files: []imv2.File{{Type: imv2.FileImage, FileRef: "r"}}}, Created: t0}
	f.Add(Append(nil, &e))
	f.Add([]byte{})
	f.Add([]byte{1, 'm', 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}) // a huge file count
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode("ch", b) // must not panic
		if err != nil {
			return
		}
		again, err := Decode("ch", Append(nil, &e))
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("re-encoding a decoded entry does not round trip: %v", err)
		}
	})
}

// The size argument for binary over JSON, kept honest: a typical one-file
// message must encode at most half the size of its JSON.
func TestEncoding_SmallerThanJSON(t *testing.T) {
	e := imv2.PendingEntry{ChannelID: "ch", Created: t0, Message: imv2.ChatMessage{
		MessageID: "0190f5b2-7c1e-7b3a-9f4e-2d1c0b9a8e7f",
		Text:      "Here is the report you asked for.",
		Files: []imv2.File{{Type: imv2.FileFile, FileRef: "f_01J2ZK8Q", Filename: "report.pdf",
			MimeType: "application/pdf", ByteSize: 48213, ExpiresAt: 1_893_553_445_000,
			DownloadURL: "/files/refs/f_01J2ZK8Q"}},
	}}
	bin := Append(nil, &e)
	js, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("binary %d bytes, JSON %d bytes", len(bin), len(js))
	if 2*len(bin) > len(js) {
		t.Fatalf("binary %d bytes is not at most half of JSON's %d", len(bin), len(js))
	}
}
