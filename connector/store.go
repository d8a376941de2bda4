package connector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/xagentkit/imv2"
)

// FileStore keeps the bytes behind file_refs: files xAgent uploads for a
// final (T1, M7) and user files the Connector offers to xAgent (M6). Every
// file belongs to one connector_channel_id and expires.
//
// File refs a store issues must match [A-Za-z0-9_-]{16,128} and carry at
// least 128 random bits; the Handler answers 404 for any other ref without
// asking the store. Implementations must be safe for concurrent use and
// return errors that match ErrFileNotFound, ErrWrongChannel, ErrFileTooLarge
// and ErrStoreFull under errors.Is.
type FileStore interface {
	// Put stores the bytes of r for channelID. filename and mime are hints:
	// the store cleans the name and may detect the type. It must check
	// its caps as it reads, never buffering past them: r is a network
	// body. A store that can check them before reading implements
	// Reserver too.
	Put(ctx context.Context, channelID, filename, mime string, r io.Reader) (FileInfo, error)
	// Open returns the file's bytes and metadata. An unknown or expired ref
	// is ErrFileNotFound; a ref of another channel is ErrWrongChannel.
	Open(ctx context.Context, channelID, fileRef string) (io.ReadCloser, FileInfo, error)
	// Delete removes a file early; an unknown ref is not an error.
	Delete(ctx context.Context, channelID, fileRef string) error
}

// FileInfo describes one stored file.
type FileInfo struct {
	// FileRef is the store's opaque ID of the file, the file_ref xAgent
	// names it by.
	FileRef string
	// Type is the profile's file type, from MimeType (FileTypeOf).
	Type imv2.FileType
	// Filename is the name given, cleaned by the built-in stores (its last
	// path element, no control or bidi characters, at most
	// imv2.MaxFilenameChars characters; "file" when nothing is left).
	Filename string
	// MimeType is the given or sniffed media type.
	MimeType string
	// ByteSize is the stored length in bytes.
	ByteSize int64
	// ExpiresAt is when the store forgets the file (FileTTL).
	ExpiresAt time.Time
}

// Stable codes of the transfer plane. They travel in the JSON error body of
// a failed request: {"error":{"code":"…","message":"…"}}.
const (
	CodeUnauthorized     imv2.Code = "unauthorized"
	CodeForbidden        imv2.Code = "forbidden"
	CodeNotFound         imv2.Code = "not_found"
	CodeMethodNotAllowed imv2.Code = "method_not_allowed"
	CodeInvalidUpload    imv2.Code = "invalid_upload"
	CodeFileNotFound     imv2.Code = "file_not_found"
	CodeWrongChannel     imv2.Code = "file_channel_mismatch"
	CodeFileTooLarge     imv2.Code = "file_too_large"
	CodeStoreFull        imv2.Code = "file_store_full"
	CodeUploadsBusy      imv2.Code = "uploads_busy"
	CodeUploadFailed     imv2.Code = "upload_failed"
)

// Sentinels for errors.Is on FileStore errors; they compare by code.
var (
	ErrFileNotFound = &imv2.Error{Code: CodeFileNotFound, Message: "file_ref is unknown or expired"}
	ErrWrongChannel = &imv2.Error{Code: CodeWrongChannel, Message: "file_ref belongs to another channel"}
	ErrFileTooLarge = &imv2.Error{Code: CodeFileTooLarge, Message: "file is over the size limit"}
	ErrStoreFull    = &imv2.Error{Code: CodeStoreFull, Message: "file store is full", Retryable: true}
)

// FileTypeOf maps a MIME type to files[].type (M4): image/*, video/* and
// audio/* keep their family, everything else is "file".
func FileTypeOf(mimeType string) imv2.FileType {
	major, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(mimeType)), "/")
	switch major {
	case "image":
		return imv2.FileImage
	case "video":
		return imv2.FileVideo
	case "audio":
		return imv2.FileAudio
	}
	return imv2.FileFile
}

// refPrefix starts every ref NewMemoryFileStore issues.
const refPrefix = "file_"

// newFileRef returns "file_" and 128 random bits in hex.
func newFileRef() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return refPrefix + hex.EncodeToString(b[:])
}

// validRef reports whether ref may be passed to a FileStore: only
// [A-Za-z0-9_-], 16 to 128 bytes, so no dot, slash or percent sign reaches
// storage.
func validRef(ref string) bool {
	if len(ref) < 16 || len(ref) > 128 {
		return false
	}
	for i := 0; i < len(ref); i++ {
		c := ref[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// validChannelID reports whether id may name a channel here: non-empty,
// bounded, printable ASCII without spaces (it is signed into URLs and
// compared, never interpreted).
func validChannelID(id string) bool {
	if id == "" || len(id) > imv2.MaxIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f {
			return false
		}
	}
	return true
}

// cleanFilename keeps the last path element of name, drops control
// characters, format characters (Unicode category Cf: bidi overrides such
// as U+202E, which make "evil\u202Etxt.exe" read as "evilexe.txt", zero-width
// spaces and joiners, the BOM, tag characters), line and paragraph
// separators, and the path separators a message keeps as sent (a filename
// is metadata), and bounds it to imv2.MaxFilenameChars characters; an
// empty result becomes "file".
func cleanFilename(name string) string {
	name = strings.ReplaceAll(name, "\\", "/")
	name = path.Base(name)
	name = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || r == '/' || r == '\\' {
			return -1
		}
		return r
	}, name)
	if name == "." || name == ".." { // also once a dropped character stood between the dots
		name = ""
	}
	if n := utf8.RuneCountInString(name); n > imv2.MaxFilenameChars {
		for ; n > imv2.MaxFilenameChars; n-- {
			_, size := utf8.DecodeLastRuneInString(name)
			name = name[:len(name)-size]
		}
	}
	if strings.TrimSpace(name) == "" {
		return "file"
	}
	return name
}

// detectMIME picks the file's media type: the declared one if it parses and
// says more than application/octet-stream, else the filename's extension,
// else a sniff of the first bytes. The result is re-formatted, so it is safe
// in a Content-Type header.
func detectMIME(declared, filename string, head []byte) string {
	if t, ok := cleanMIME(declared); ok && t != "application/octet-stream" {
		return t
	}
	if ext := path.Ext(filename); ext != "" {
		if t, ok := cleanMIME(mime.TypeByExtension(ext)); ok {
			return t
		}
	}
	if t, ok := cleanMIME(http.DetectContentType(head)); ok {
		return t
	}
	return "application/octet-stream"
}

func cleanMIME(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	mt, params, err := mime.ParseMediaType(s)
	if err != nil || !strings.Contains(mt, "/") {
		return "", false
	}
	out := mime.FormatMediaType(mt, params)
	if out == "" {
		return "", false
	}
	return out, true
}
