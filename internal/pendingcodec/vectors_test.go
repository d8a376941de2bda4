package pendingcodec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
)

// vector is one entry of testdata/vectors.json. Its entry spells out the
// encoded fields one by one, so the file does not follow the wire
// format's JSON tags.
type vector struct {
	Name    string       `json:"name"`
	Hex     string       `json:"hex"`
	Corrupt bool         `json:"corrupt"`
	Entry   *vectorEntry `json:"entry"`
}

type vectorEntry struct {
	MessageID string `json:"message_id"`
	CreatedS  int64  `json:"created_s"`
	CreatedNS int64  `json:"created_ns"`
	CreatedAt int64  `json:"created_at"`
	Text      string `json:"text"`
	Files     []struct {
		Type        string `json:"type"`
		FileRef     string `json:"file_ref"`
		Filename    string `json:"filename"`
		MimeType    string `json:"mime_type"`
		ByteSize    int64  `json:"byte_size"`
		ExpiresAt   int64  `json:"expires_at"`
		DownloadURL string `json:"download_url"`
	} `json:"files"`
}

func (v *vectorEntry) pending(channelID string) imv2.PendingEntry {
	e := imv2.PendingEntry{ChannelID: channelID, Created: time.Unix(v.CreatedS, v.CreatedNS).UTC(), Message: imv2.ChatMessage{
		MessageID: v.MessageID, CreatedAt: v.CreatedAt, Text: v.Text,
	}}
	for _, f := range v.Files {
		e.Message.Files = append(e.Message.Files, imv2.File{
			Type: imv2.FileType(f.Type), FileRef: f.FileRef, Filename: f.Filename, MimeType: f.MimeType,
			ByteSize: f.ByteSize, ExpiresAt: f.ExpiresAt, DownloadURL: f.DownloadURL,
		})
	}
	return e
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	data, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Note    string   `json:"note"`
		Vectors []vector `json:"vectors"`
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields() // a misspelt member would switch a check off
	if err := d.Decode(&file); err != nil {
		t.Fatalf("vectors.json: %v", err)
	}
	var good, bad int
	for _, v := range file.Vectors {
		if v.Corrupt {
			bad++
		} else {
			good++
		}
	}
	if good < 3 || bad < 5 {
		t.Fatalf("vectors.json has %d good and %d corrupt vectors, want at least 3 and 5", good, bad)
	}
	return file.Vectors
}

// TestVectors_Version1: Append writes each vector's bytes exactly (a
// strict writer: the stores' bytes never drift), Decode reads them back,
// and refuses every corrupt one.
func TestVectors_Version1(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			b, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatalf("hex: %v", err)
			}
			if v.Corrupt != (v.Entry == nil) {
				t.Fatalf("a vector has an entry or is corrupt, not both nor neither")
			}
			got, err := Decode("ch", b)
			if v.Corrupt {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Decode: %+v, %v; want ErrCorrupt", got, err)
				}
				return
			}
			want := v.Entry.pending("ch")
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Decode:\n got %+v\nwant %+v", got, want)
			}
			if enc := Append(nil, &want); !bytes.Equal(enc, b) {
				t.Fatalf("Append:\n got %x\nwant %x", enc, b)
			}
		})
	}
}
