package connector_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
)

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

var refRE = regexp.MustCompile(`^file_[0-9a-f]{32}$`)

func TestFiles_T1_T2_UploadDownloadRoundTrip5MiB(t *testing.T) {
	var hooked []connector.Upload
	e := newEnv(t, func(c *connector.HandlerConfig) {
		c.OnUpload = func(_ context.Context, u connector.Upload) error {
			hooked = append(hooked, u) // handler calls are sequential in this test
			return nil
		}
	})
	data := randomBytes(t, 5<<20)
	r := e.upload(t, "cch_1", form{
		filename: "photo.png", mime: "image/png", file: data,
		fields: map[string]string{"recipient_ref": "user-42", "reply_token": "rt-7"},
	})
	require.Equal(t, http.StatusOK, r.status, string(r.body))

	// The response is exactly the five members of T1.
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.body, &raw))
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"file_ref", "file_type", "filename", "byte_size", "expires_at"}, keys)
	var u uploadJSON
	require.NoError(t, json.Unmarshal(r.body, &u))
	assert.Regexp(t, refRE, u.FileRef)
	assert.Equal(t, "image", u.FileType)
	assert.Equal(t, "photo.png", u.Filename)
	assert.Equal(t, int64(5<<20), u.ByteSize)
	assert.Equal(t, epoch.Add(connector.DefaultFileTTL).UnixMilli(), u.ExpiresAt)

	require.Len(t, hooked, 1)
	assert.Equal(t, "cch_1", hooked[0].ChannelID)
	assert.Equal(t, "user-42", hooked[0].RecipientRef)
	assert.Equal(t, "rt-7", hooked[0].ReplyToken)
	assert.Equal(t, u.FileRef, hooked[0].File.FileRef)

	dl := e.h.DownloadURL("cch_1", u.FileRef)
	assert.True(t, strings.HasPrefix(dl, "/files/refs/"+u.FileRef+"?"), dl)
	require.NoError(t, imv2.CheckDownloadURL(dl))
	g := e.do(t, http.MethodGet, dl, "", nil, nil) // no key: the URL is the authorization
	require.Equal(t, http.StatusOK, g.status, string(g.body))
	assert.True(t, bytes.Equal(data, g.body), "bytes differ")
	assert.Equal(t, "image/png", g.header.Get("Content-Type"))
	_, params, err := mime.ParseMediaType(g.header.Get("Content-Disposition"))
	require.NoError(t, err)
	assert.Equal(t, "photo.png", params["filename"])
	assert.Equal(t, "nosniff", g.header.Get("X-Content-Type-Options"))
	assert.Contains(t, g.header.Get("Cache-Control"), "no-store")

	// The Target side can open the upload too (M7).
	rc, info, err := e.h.OpenFile(context.Background(), "cch_1", u.FileRef)
	require.NoError(t, err)
	defer rc.Close()
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, got))
	assert.Equal(t, imv2.FileImage, info.Type)
}

func TestFiles_T1_FileTypeAndNameFromUpload(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		name, mime, wantType, wantName string
		data                           []byte
	}{
		{"clip.mp4", "video/mp4", "video", "clip.mp4", []byte("x")},
		{"voice.ogg", "audio/ogg", "audio", "voice.ogg", []byte("x")},
		{"doc.pdf", "application/pdf", "file", "doc.pdf", []byte("x")},
		{"noext", "", "image", "noext", append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 16)...)}, // sniffed
		{"pic.jpg", "application/octet-stream", "image", "pic.jpg", []byte("x")},                  // by extension
		{`..\..\evil.txt`, "text/plain", "file", "evil.txt", []byte("x")},                         // path dropped
	} {
		u := mustUpload(t, e, "cch_1", form{filename: c.name, mime: c.mime, file: c.data})
		assert.Equal(t, c.wantType, u.FileType, c.name)
		assert.Equal(t, c.wantName, u.Filename, c.name)
	}
}

func TestFiles_T1_MissingChannelHeaderIs400(t *testing.T) {
	e := newEnv(t, nil)
	r := e.upload(t, "", form{filename: "a.txt", file: []byte("hi")})
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, string(imv2.CodeChannelIDRequired), errCode(t, r.body))

	r = e.upload(t, "bad channel", form{filename: "a.txt", file: []byte("hi")})
	assert.Equal(t, http.StatusBadRequest, r.status)
	n, _ := e.store.FileStore.(*connector.MemoryFileStore).Len()
	assert.Zero(t, n)
}

func TestFiles_T1_BadMultipartIs400(t *testing.T) {
	e := newEnv(t, nil)
	hdr := map[string]string{connector.HeaderChannelID: "cch_1", "Content-Type": "application/json"}
	r := e.do(t, http.MethodPost, "/files/uploads", testKey, hdr, strings.NewReader(`{}`))
	assert.Equal(t, http.StatusBadRequest, r.status)

	r = e.upload(t, "cch_1", form{fields: map[string]string{"recipient_ref": "u"}}) // no file part
	assert.Equal(t, http.StatusBadRequest, r.status)

	r = e.upload(t, "cch_1", form{filename: "a", file: []byte("1"), twoFiles: true})
	assert.Equal(t, http.StatusBadRequest, r.status)

	r = e.upload(t, "cch_1", form{filename: "a", file: []byte("1"),
		fields: map[string]string{"reply_token": strings.Repeat("t", 2000)}})
	assert.Equal(t, http.StatusBadRequest, r.status)

	n, _ := e.store.FileStore.(*connector.MemoryFileStore).Len()
	assert.Zero(t, n, "a failed upload leaves no file behind")
}

func TestFiles_T1_OverSizeCapIs413(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, func(c *connector.HandlerConfig) { c.MaxUploadBytes = limit })
	r := e.upload(t, "cch_1", form{filename: "big.bin", file: make([]byte, limit+1)})
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	assert.Equal(t, string(connector.CodeFileTooLarge), errCode(t, r.body))
	n, _ := e.store.FileStore.(*connector.MemoryFileStore).Len()
	assert.Zero(t, n)

	mustUpload(t, e, "cch_1", form{filename: "fits.bin", file: make([]byte, limit)})

	// A declared Content-Length over the cap is refused before reading;
	// through a recorder, so no half-written request races the answer.
	body, ct := form{filename: "huge.bin", file: make([]byte, 2*limit)}.encode(t)
	cr := &countReader{r: body}
	req := httptest.NewRequest(http.MethodPost, "/files/uploads", cr)
	req.ContentLength = int64(body.Len())
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", ct)
	req.Header.Set(connector.HeaderChannelID, "cch_1")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	assert.Zero(t, cr.n, "refused before reading the body")

	// Without a Content-Length, MaxBytesReader stops a body over the cap
	// whether the bytes sit in the file or in unknown fields.
	for name, f := range map[string]form{
		"chunked file": {filename: "huge.bin", file: make([]byte, 2*limit)},
		"junk field":   {filename: "a", file: []byte("1"), fields: map[string]string{"junk": strings.Repeat("j", 2*limit)}},
	} {
		body, ct := f.encode(t)
		req := httptest.NewRequest(http.MethodPost, "/files/uploads", io.MultiReader(body))
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", ct)
		req.Header.Set(connector.HeaderChannelID, "cch_1")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, name)
	}
	n, _ = e.store.FileStore.(*connector.MemoryFileStore).Len()
	assert.Equal(t, 1, n, "only the file that fits is stored")
}

func TestFiles_T1_HookErrorFailsUploadAndDeletesFile(t *testing.T) {
	e := newEnv(t, func(c *connector.HandlerConfig) {
		c.OnUpload = func(context.Context, connector.Upload) error { return io.ErrUnexpectedEOF }
	})
	r := e.upload(t, "cch_1", form{filename: "a.txt", file: []byte("hi")})
	assert.Equal(t, http.StatusInternalServerError, r.status)
	n, _ := e.store.FileStore.(*connector.MemoryFileStore).Len()
	assert.Zero(t, n)
}

func TestFiles_T2_ExpiredFileIs404(t *testing.T) {
	e := newEnv(t, func(c *connector.HandlerConfig) {
		c.FileTTL = 10 * time.Minute
		c.URLTTL = time.Hour
	})
	u := mustUpload(t, e, "cch_1", form{filename: "a.txt", file: []byte("hi")})
	dl := e.h.DownloadURL("cch_1", u.FileRef)
	require.Equal(t, http.StatusOK, e.do(t, http.MethodGet, dl, "", nil, nil).status)
	e.clock.Advance(10 * time.Minute)
	r := e.do(t, http.MethodGet, dl, "", nil, nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Equal(t, string(connector.CodeFileNotFound), errCode(t, r.body))
}

func TestFiles_T3_ExpiredURLIs404(t *testing.T) {
	e := newEnv(t, func(c *connector.HandlerConfig) { c.URLTTL = 5 * time.Minute })
	u := mustUpload(t, e, "cch_1", form{filename: "a.txt", file: []byte("hi")})
	dl := e.h.DownloadURL("cch_1", u.FileRef)
	e.clock.Advance(5*time.Minute - time.Second)
	require.Equal(t, http.StatusOK, e.do(t, http.MethodGet, dl, "", nil, nil).status)
	e.clock.Advance(time.Second)
	assert.Equal(t, http.StatusNotFound, e.do(t, http.MethodGet, dl, "", nil, nil).status)
	// A fresh URL for the live file works again.
	assert.Equal(t, http.StatusOK, e.do(t, http.MethodGet, e.h.DownloadURL("cch_1", u.FileRef), "", nil, nil).status)
}

func TestFiles_T2_UnknownRefIs404(t *testing.T) {
	e := newEnv(t, nil)
	ref := "file_00000000000000000000000000000000"
	assert.Equal(t, http.StatusNotFound, e.do(t, http.MethodGet, e.h.DownloadURL("cch_1", ref), "", nil, nil).status)
}

func TestFiles_T2_ForeignChannelIs403(t *testing.T) {
	e := newEnv(t, nil)
	u := mustUpload(t, e, "cch_A", form{filename: "a.txt", file: []byte("secret of A")})
	r := e.do(t, http.MethodGet, e.h.DownloadURL("cch_B", u.FileRef), "", nil, nil)
	assert.Equal(t, http.StatusForbidden, r.status)
	assert.Equal(t, string(connector.CodeWrongChannel), errCode(t, r.body))
	assert.NotContains(t, string(r.body), "secret of A")

	_, _, err := e.h.OpenFile(context.Background(), "cch_B", u.FileRef)
	assert.ErrorIs(t, err, connector.ErrWrongChannel)
}

func TestFiles_T3_TamperedURLIs403(t *testing.T) {
	e := newEnv(t, nil)
	u := mustUpload(t, e, "cch_A", form{filename: "a.txt", file: []byte("hi")})
	other := mustUpload(t, e, "cch_A", form{filename: "b.txt", file: []byte("ho")})
	dl := e.h.DownloadURL("cch_A", u.FileRef)
	parsed, err := url.Parse(dl)
	require.NoError(t, err)
	q := parsed.Query()

	with := func(mod func(url.Values), ref string) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = append([]string(nil), vs...)
		}
		mod(v)
		return "/files/refs/" + ref + "?" + v.Encode()
	}
	flip := func(s string) string {
		b := []byte(s)
		if b[3] == 'A' {
			b[3] = 'B'
		} else {
			b[3] = 'A'
		}
		return string(b)
	}
	// Another signing key: the key follows the API key (URLKeyInfo).
	otherHandler := newEnv(t, func(c *connector.HandlerConfig) { c.APIKey = testKey + "-other" }).h
	cases := map[string]string{
		"sig flipped":      with(func(v url.Values) { v.Set("sig", flip(v.Get("sig"))) }, u.FileRef),
		"sig missing":      with(func(v url.Values) { v.Del("sig") }, u.FileRef),
		"sig truncated":    with(func(v url.Values) { v.Set("sig", v.Get("sig")[:20]) }, u.FileRef),
		"channel swapped":  with(func(v url.Values) { v.Set("ch", "cch_B") }, u.FileRef),
		"exp extended":     with(func(v url.Values) { v.Set("exp", "99999999999") }, u.FileRef),
		"exp missing":      with(func(v url.Values) { v.Del("exp") }, u.FileRef),
		"ref swapped":      with(func(url.Values) {}, other.FileRef),
		"other signer key": otherHandler.DownloadURL("cch_A", u.FileRef),
		"no query":         "/files/refs/" + u.FileRef,
	}
	for name, p := range cases {
		r := e.do(t, http.MethodGet, p, "", nil, nil)
		assert.Equal(t, http.StatusForbidden, r.status, name)
	}
	assert.Zero(t, e.store.opens.Load(), "a bad signature never reaches the store")
	assert.Equal(t, http.StatusOK, e.do(t, http.MethodGet, dl, "", nil, nil).status)
}

func TestFiles_T3_PathTraversalIs404BeforeStorage(t *testing.T) {
	e := newEnv(t, nil)
	u := mustUpload(t, e, "cch_1", form{filename: "a.txt", file: []byte("hi")})
	_, query, _ := strings.Cut(e.h.DownloadURL("cch_1", u.FileRef), "?")
	for _, p := range []string{
		"/files/refs/../connector-card.json",
		"/files/refs/../../etc/passwd",
		"/files/refs/..%2f..%2fetc%2fpasswd",
		"/files/refs/%2e%2e/%2e%2e/etc/passwd",
		"/files/refs/%2e%2e%2fconnector-card.json",
		"/files/refs/%2E%2E",
		"/files/refs/" + u.FileRef + "/..",
		"/files/refs/" + u.FileRef + "%2f..%2f..",
		"/files/refs/./" + u.FileRef,
		"/files/refs/" + u.FileRef + "%00",
		"/files/refs/" + u.FileRef + ".txt",
		"/files/refs/",
		"/files/refs/short",
		"/files/refs/" + strings.Repeat("a", 129),
	} {
		r := e.do(t, http.MethodGet, p+"?"+query, "", nil, nil)
		assert.Equal(t, http.StatusNotFound, r.status, p)
		assert.NotContains(t, string(r.body), "connector_card_id", p)
	}
	assert.Zero(t, e.store.opens.Load(), "no traversal attempt reached the store")
}

func TestFiles_T3_RefsAreRandom128Bit(t *testing.T) {
	e := newEnv(t, nil)
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		u := mustUpload(t, e, "cch_1", form{filename: "a.txt", file: []byte("same bytes")})
		assert.Regexp(t, refRE, u.FileRef)
		assert.False(t, seen[u.FileRef], "ref repeated")
		seen[u.FileRef] = true
	}
}

func TestOfferFile_M6_T3_SignedDownloadURL(t *testing.T) {
	e := newEnv(t, nil)
	data := randomBytes(t, 4096)
	f, err := e.h.OfferFile(context.Background(), "cch_1", "shot.png", "image/png", bytes.NewReader(data))
	require.NoError(t, err)
	assert.Equal(t, imv2.FileImage, f.Type)
	assert.Regexp(t, refRE, f.FileRef)
	assert.Equal(t, int64(len(data)), f.ByteSize)
	assert.Equal(t, "image/png", f.MimeType)
	assert.Equal(t, epoch.Add(time.Hour).UnixMilli(), f.ExpiresAt)
	// Ready for a user chat.message to xAgent (M6).
	m := imv2.ChatMessage{MessageID: "msg_1", Files: []imv2.File{f}}
	require.NoError(t, m.Validate(imv2.ToXAgent))

	r := e.do(t, http.MethodGet, f.DownloadURL, "", nil, nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.True(t, bytes.Equal(data, r.body))

	_, err = e.h.OfferFile(context.Background(), "", "x", "", strings.NewReader("x"))
	assert.Error(t, err)
}

func TestFileTypeOf_M4(t *testing.T) {
	for mt, want := range map[string]imv2.FileType{
		"image/png": imv2.FileImage, "IMAGE/JPEG": imv2.FileImage, "video/mp4": imv2.FileVideo,
		"audio/ogg; codecs=opus": imv2.FileAudio, "application/pdf": imv2.FileFile, "": imv2.FileFile,
		"text/plain": imv2.FileFile, "imagex/png": imv2.FileFile,
	} {
		assert.Equal(t, want, connector.FileTypeOf(mt), mt)
	}
}

type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestFiles_T1_UploadCapHoldsOverALargerStore(t *testing.T) {
	const limit = 64 << 10
	e := newEnv(t, func(c *connector.HandlerConfig) {
		c.MaxUploadBytes = limit
		c.Files = connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{MaxFileBytes: 10 * limit})
	})
	r := e.upload(t, "cch_1", form{filename: "a.bin", file: make([]byte, limit+1)})
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	mustUpload(t, e, "cch_1", form{filename: "a.bin", file: make([]byte, limit)})
	_, err := e.h.OfferFile(context.Background(), "cch_1", "b.bin", "", bytes.NewReader(make([]byte, limit+1)))
	assert.ErrorIs(t, err, connector.ErrFileTooLarge)
}

// TestFiles_T1_FieldsBeforeTheFileShare64KiB: the part headers and fields
// before the file part share 64 KiB (multipart alone would let one part's
// headers reach 10 MiB), so a junk field of 70 KiB is 413 however small the
// file; the file keeps its whole MaxUploadBytes after them.
func TestFiles_T1_FieldsBeforeTheFileShare64KiB(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, func(c *connector.HandlerConfig) { c.MaxUploadBytes = limit })
	r := e.upload(t, "cch_1", form{filename: "a", file: []byte("1"), fields: map[string]string{"junk": strings.Repeat("j", 70<<10)}})
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	n, _ := e.store.FileStore.(*connector.MemoryFileStore).Len()
	assert.Zero(t, n)
	mustUpload(t, e, "cch_1", form{filename: "a", file: make([]byte, limit), fields: map[string]string{"junk": strings.Repeat("j", 50<<10), "recipient_ref": "r1"}})
}
