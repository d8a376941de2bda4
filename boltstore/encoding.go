package boltstore

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/xagentkit/imv2"
)

// A pending entry's value, layout 1. Every string is a uvarint length and
// its bytes; every integer a (zig-zag) varint. The channel ID is in the key.
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

// errCorrupt reports a value that does not decode; the file was damaged or
// written by something else.
var errCorrupt = errors.New("boltstore: corrupt pending entry")

// minFileBytes is the shortest encoding of one file: four empty strings,
// two one-byte varints and one more empty string.
const minFileBytes = 7

func appendEntry(b []byte, e *imv2.PendingEntry) []byte {
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

// decodeEntry decodes a value written by appendEntry. It copies every
// string out of b, which bbolt owns only for the transaction. It never
// panics: damaged input is errCorrupt.
func decodeEntry(channelID string, b []byte) (imv2.PendingEntry, error) {
	d := decoder{b: b}
	var e imv2.PendingEntry
	e.ChannelID = channelID
	m := &e.Message
	m.MessageID = d.str()
	sec, nsec := d.varint(), d.uvarint()
	if nsec >= uint64(time.Second) {
		return imv2.PendingEntry{}, errCorrupt
	}
	e.Created = time.Unix(sec, int64(nsec)).UTC()
	m.CreatedAt = d.varint()
	m.Text = d.str()
	n := d.uvarint()
	if n > uint64(len(d.b)/minFileBytes) {
		return imv2.PendingEntry{}, errCorrupt
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
		return imv2.PendingEntry{}, errCorrupt
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
