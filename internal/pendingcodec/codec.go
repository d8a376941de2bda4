// Package pendingcodec is the binary encoding of a pending entry
// (imv2.PendingEntry) that the SDK's durable stores keep: boltstore as the
// value of its pending bucket (the file's layout_version says which
// encoding), pgstore in the message column behind a version prefix of its
// own. One codec, so the stores agree byte for byte and a change is made,
// and tested against testdata/vectors.json, once.
package pendingcodec

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/xagentkit/imv2"
)

// Version is the version of the encoding Append writes and Decode reads.
// A change to the layout below is a new version, and a new vector file;
// the stores record the version they wrote (boltstore's layout_version,
// pgstore's row prefix).
const Version = 1

// An entry, version 1. Every string is a uvarint length and its bytes;
// every integer a (zig-zag) varint. The channel ID is not in it: the
// stores keep it in the key.
//
//	message_id
//	created seconds (varint), created nanoseconds (uvarint)
//	message created_at (varint)
//	text
//	file count (uvarint), then per file:
//	    type, file_ref, filename, mime_type, byte_size (varint),
//	    expires_at (varint), download_url
//
// Binary rather than JSON: the fields are few and fixed, a JSON object would
// repeat every field name in every entry (a one-file message is about twice
// the size), the store would need its own struct tags for Created anyway,
// and the on-disk format stays ours, versioned by layout_version, instead of
// following the wire format's tags.

// ErrCorrupt reports bytes that do not decode: the store was damaged or
// written by something else.
var ErrCorrupt = errors.New("corrupt pending entry")

// minFileBytes is the shortest encoding of one file: four empty strings,
// two one-byte varints and one more empty string.
const minFileBytes = 7

// Append appends the encoding of e, without its ChannelID, to b.
func Append(b []byte, e *imv2.PendingEntry) []byte {
	m := &e.Message
	b = appendString(b, m.MessageID)
	b = binary.AppendVarint(b, e.Created.Unix())
	b = binary.AppendUvarint(b, uint64(e.Created.Nanosecond()))
	b = binary.AppendVarint(b, m.CreatedAt)
	b = appendString(b, m.Text)
	b = binary.AppendUvarint(b, uint64(len(m.Files)))
	for i := range m.Files {
		f := &m.Files[i]
		b = appendString(b, string(f.Type))
		b = appendString(b, f.FileRef)
		b = appendString(b, f.Filename)
		b = appendString(b, f.MimeType)
		b = binary.AppendVarint(b, f.ByteSize)
		b = binary.AppendVarint(b, f.ExpiresAt)
		b = appendString(b, f.DownloadURL)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Decode decodes bytes written by Append, as the entry of channelID. It
// copies every string out of b (bbolt owns b only for its transaction),
// and reads strictly: a short, long or damaged input is ErrCorrupt, never
// a panic.
func Decode(channelID string, b []byte) (imv2.PendingEntry, error) {
	d := decoder{b: b}
	var e imv2.PendingEntry
	e.ChannelID = channelID
	m := &e.Message
	m.MessageID = d.str()
	sec, nsec := d.varint(), d.uvarint()
	if nsec >= uint64(time.Second) {
		return imv2.PendingEntry{}, ErrCorrupt
	}
	e.Created = time.Unix(sec, int64(nsec)).UTC()
	m.CreatedAt = d.varint()
	m.Text = d.str()
	n := d.uvarint()
	if n > uint64(len(d.b)/minFileBytes) {
		return imv2.PendingEntry{}, ErrCorrupt
	}
	if n > 0 {
		m.Files = make([]imv2.File, n)
	}
	for i := range m.Files {
		f := &m.Files[i]
		f.Type = imv2.FileType(d.str())
		f.FileRef = d.str()
		f.Filename = d.str()
		f.MimeType = d.str()
		f.ByteSize = d.varint()
		f.ExpiresAt = d.varint()
		f.DownloadURL = d.str()
	}
	if d.bad || len(d.b) != 0 {
		return imv2.PendingEntry{}, ErrCorrupt
	}
	return e, nil
}

// decoder reads varints and strings off b; after the first failure every
// read returns zero and bad stays set.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) fail() {
	d.bad = true
	d.b = nil
}
