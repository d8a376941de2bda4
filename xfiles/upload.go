package xfiles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strings"

	"github.com/xagentkit/imv2"
)

// HeaderChannelID names the channel of an upload (T1).
const HeaderChannelID = "X-XAgent-Connector-Channel-ID"

// UploadResult is the Connector's answer to POST /files/uploads (T1).
// Only file_ref is required (Common Protocol §5.1 shows the other members
// in an example only): Do fills a missing file_type from the part's MIME
// type, a missing filename with the one sent, and a missing byte_size
// with the number of bytes sent; expires_at stays 0 (unknown).
type UploadResult struct {
	FileRef   string        `json:"file_ref"`
	FileType  imv2.FileType `json:"file_type"`
	Filename  string        `json:"filename"`
	ByteSize  int64         `json:"byte_size"`
	ExpiresAt int64         `json:"expires_at"` // Unix ms
}

// File returns the files[] entry of an assistant final for this upload
// (M7): its file_ref and metadata, no download_url.
func (u UploadResult) File() imv2.File {
	return imv2.File{
		Type:      u.FileType,
		FileRef:   u.FileRef,
		Filename:  u.Filename,
		ByteSize:  u.ByteSize,
		ExpiresAt: u.ExpiresAt,
	}
}

// UploadRequest is one upload with every optional field; Upload is the
// short form.
type UploadRequest struct {
	BaseURL   string // Connector base URL (catalog), http or https
	APIKey    string // sent as "Authorization: Bearer"; empty sends none
	ChannelID string // X-XAgent-Connector-Channel-ID, required
	Filename  string
	// MimeType is the part's Content-Type; empty guesses from Filename's
	// extension, else application/octet-stream.
	MimeType     string
	RecipientRef string // optional form field recipient_ref
	ReplyToken   string // optional form field reply_token
	Body         io.Reader
}

// Upload sends r as the multipart field "file" of POST /files/uploads for
// channelID (M7, T1) and returns the Connector's answer; put
// UploadResult.File() into the final chat.message.
func Upload(ctx context.Context, client *http.Client, baseURL, apiKey, channelID, filename string, r io.Reader) (UploadResult, error) {
	q := UploadRequest{BaseURL: baseURL, APIKey: apiKey, ChannelID: channelID, Filename: filename, Body: r}
	return q.Do(ctx, client)
}

var errUploadDone = errors.New("xfiles: upload finished")

// Do performs the upload. The body is streamed (no copy of the file in
// memory). Redirects are not followed, so the API key goes nowhere but
// BaseURL. Do returns once its form-writing goroutine has stopped, unless
// ctx ends first while Body blocks in Read; the goroutine then ends with
// that Read.
//
// The request carries "Expect: 100-continue", and a Content-Length when
// Body's size is known (a Len method, as bytes.Reader, strings.Reader and
// bytes.Buffer have, or a regular *os.File). So the Connector's
// refusals on the headers (a wrong key, too many uploads, a full store, a
// declared size over its cap) arrive before any byte of the file is read
// or sent, and no write into a connection the Connector has closed can
// take their place (net/http returns that write's error, not the answer,
// when the write fails first). The client's transport must wait for the
// go-ahead: http.DefaultTransport waits up to 1 s; an *http.Transport with
// a zero ExpectContinueTimeout sends the body at once. A body of unknown
// size over the Connector's cap is refused mid-stream: its 413 comes while
// the body is still being sent, and a client that keeps sending past the
// Connector's short linger may see the connection reset instead (a
// Retryable error); give Body a Len to have it refused on the headers.
func (q *UploadRequest) Do(ctx context.Context, client *http.Client) (UploadResult, error) {
	base, err := ParseBaseURL(q.BaseURL)
	if err != nil {
		return UploadResult{}, err
	}
	if q.ChannelID == "" {
		return UploadResult{}, imv2.Errorf(imv2.CodeChannelIDRequired, "xfiles: upload needs a connector_channel_id")
	}
	if q.Body == nil {
		return UploadResult{}, imv2.Refused(errors.New("xfiles: upload has no body"))
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()

	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	size := bodySize(q.Body) // before the form reads it
	length := q.formLength(mw.Boundary())
	done := make(chan struct{})
	sent := &countingReader{r: q.Body}
	go func() {
		defer close(done)
		pw.CloseWithError(q.writeForm(mw, sent)) // nil closes with EOF
	}()
	defer func() {
		pr.CloseWithError(errUploadDone) // unblocks a writer the transport left behind
		select {
		case <-done:
		case <-ctx.Done():
		}
	}()

	u := joinPath(base, &url.URL{Path: "/files/uploads"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), pr)
	if err != nil {
		return UploadResult{}, imv2.Refused(fmt.Errorf("%w: %w", ErrRefusedURL, err))
	}
	if length >= 0 {
		req.ContentLength = length
	} // else chunked
	req.Header.Set("Expect", "100-continue")
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set(HeaderChannelID, q.ChannelID)
	if q.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+q.APIKey)
	}
	resp, err := noRedirects(client).Do(req)
	if err != nil {
		return UploadResult{}, imv2.NotPosted(fmt.Errorf("xfiles: upload: %w", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return UploadResult{}, readHTTPError(resp)
	}
	var res UploadResult
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return UploadResult{}, imv2.NotPosted(fmt.Errorf("xfiles: upload response: %w", err))
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return UploadResult{}, imv2.Refused(errors.New("xfiles: upload response is not the expected JSON"))
	}
	if res.FileRef == "" || (res.FileType != "" && !res.FileType.Valid()) || res.ByteSize < 0 || res.ExpiresAt < 0 {
		return UploadResult{}, imv2.Refused(errors.New("xfiles: upload response lacks file_ref or has an invalid file_type, byte_size or expires_at"))
	}
	if res.FileType == "" {
		res.FileType = fileTypeOf(q.mimeType())
	}
	if res.Filename == "" {
		res.Filename = q.Filename
	}
	if res.ByteSize == 0 && size >= 0 {
		res.ByteSize = size
	} else if res.ByteSize == 0 {
		// The form writer is done with the body once it stopped: only
		// then is its count safe to read.
		pr.CloseWithError(errUploadDone)
		select {
		case <-done:
			res.ByteSize = sent.n
		case <-ctx.Done():
		}
	}
	return res, nil
}

// formLength is the exact size of the form writeForm writes with
// boundary, or -1 when Body's size is unknown.
func (q *UploadRequest) formLength(boundary string) int64 {
	n := bodySize(q.Body)
	if n < 0 {
		return -1
	}
	var c countingWriter
	mw := multipart.NewWriter(&c)
	if mw.SetBoundary(boundary) != nil || q.writeForm(mw, eofReader{}) != nil {
		return -1
	}
	return int64(c) + n
}

// bodySize is the number of bytes r has left, or -1 when it cannot tell
// without moving r: a Len method, or a regular file's size past its
// offset.
func bodySize(r io.Reader) int64 {
	switch v := r.(type) {
	case interface{ Len() int }:
		return int64(v.Len())
	case interface {
		io.Seeker
		Stat() (fs.FileInfo, error)
	}:
		fi, err := v.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return -1
		}
		cur, err := v.Seek(0, io.SeekCurrent)
		if err != nil || cur > fi.Size() {
			return -1
		}
		return fi.Size() - cur
	}
	return -1
}

// mimeType is the part's Content-Type: MimeType, else a guess from
// Filename's extension, else application/octet-stream.
func (q *UploadRequest) mimeType() string {
	mt := q.MimeType
	if mt == "" {
		mt = mime.TypeByExtension(path.Ext(q.Filename))
	}
	if mt == "" {
		mt = "application/octet-stream"
	}
	return mt
}

// fileTypeOf is the files[].type (M4) of a MIME type.
func fileTypeOf(mt string) imv2.FileType {
	major, _, _ := strings.Cut(mt, "/")
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

// countingReader counts the file's bytes as the form reads them. n is
// read only after the form-writing goroutine ended.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// writeForm writes the small fields first, then the file read from body.
func (q *UploadRequest) writeForm(mw *multipart.Writer, body io.Reader) error {
	for _, f := range []struct{ name, v string }{{"recipient_ref", q.RecipientRef}, {"reply_token", q.ReplyToken}} {
		if f.v == "" {
			continue
		}
		if err := mw.WriteField(f.name, f.v); err != nil {
			return err
		}
	}
	mt := q.mimeType()
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": "file", "filename": q.Filename}))
	h.Set("Content-Type", mt)
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, body); err != nil {
		return err
	}
	return mw.Close()
}

// noRedirects copies c so that a 3xx is returned as is, never followed.
func noRedirects(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}
