package connector

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/connid"
)

// uploadResponse is the exact /files/uploads success body (T1).
type uploadResponse struct {
	FileRef   string        `json:"file_ref"`
	FileType  imv2.FileType `json:"file_type"`
	Filename  string        `json:"filename"`
	ByteSize  int64         `json:"byte_size"`
	ExpiresAt int64         `json:"expires_at"` // Unix ms
}

// serveUpload handles POST /files/uploads (T1, M7) after the key check. It
// streams the multipart body: the file part goes straight to the store,
// capped at MaxUploadBytes while it is read, everything before it (part
// headers and the small fields) is capped at formOverhead, and the whole
// body is capped by http.MaxBytesReader, so no temporary file and no
// unbounded buffer. Before any byte of the body is read it takes an upload
// slot (its peer's floor, else one of MaxConcurrentUploads shared) and,
// from a Reserver store, the room for the declared size: either missing is 503 with Retry-After, the connection
// closed, nothing read.
func (h *Handler) serveUpload(w http.ResponseWriter, r *http.Request) {
	ch := r.Header.Get(HeaderChannelID)
	if ch == "" {
		h.fail(w, r, http.StatusBadRequest, imv2.CodeChannelIDRequired, HeaderChannelID+" header is required")
		return
	}
	if !validChannelID(ch) {
		h.fail(w, r, http.StatusBadRequest, CodeInvalidUpload, HeaderChannelID+" header is invalid")
		return
	}
	if h.cfg.ChannelOpen != nil && !h.cfg.ChannelOpen(r.Context(), ch) {
		h.fail(w, r, http.StatusConflict, imv2.CodeChannelNotOpen, "the channel is not open")
		return
	}
	if r.ContentLength > h.maxBody {
		h.fail(w, r, http.StatusRequestEntityTooLarge, CodeFileTooLarge, "upload is over the size limit")
		return
	}
	ctx := r.Context()
	peer := "h" + ch              // no connector_id known: the channel is its own peer, as in quota
	if h.cfg.ConnectorOf != nil { // slots and the stores' upload room are shared per peer
		id := h.cfg.ConnectorOf(ch)
		ctx = connid.WithConnectorID(ctx, id)
		if id != "" {
			peer = "c" + id
		}
	}
	if !h.uploads.take(peer) {
		h.failUpload(w, r, http.StatusServiceUnavailable, CodeUploadsBusy, "too many uploads in progress, retry later")
		return
	}
	defer h.uploads.release(peer)
	put := func(name, mt string, body io.Reader) (FileInfo, error) {
		return h.files.Put(ctx, ch, name, mt, body)
	}
	if rs, ok := h.files.(Reserver); ok {
		size := h.cfg.MaxUploadBytes // a chunked body may carry the largest file
		if r.ContentLength >= 0 {
			size = min(size, r.ContentLength)
		}
		res, err := rs.Reserve(ctx, ch, size)
		if err != nil {
			h.uploadErr(func(status int, code imv2.Code, msg string) { h.failUpload(w, r, status, code, msg) }, err)
			return
		}
		defer res.Release()
		put = func(name, mt string, body io.Reader) (FileInfo, error) {
			return res.Put(ctx, name, mt, body)
		}
	}
	paced := h.newPacedBody(w, r.Body, r.ContentLength)
	bodyCap := &phasedReader{r: http.MaxBytesReader(w, paced, h.maxBody), left: formOverhead}
	r.Body = struct {
		io.Reader
		io.Closer
	}{bodyCap, r.Body}
	mr, err := r.MultipartReader()
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, CodeInvalidUpload, "body is not multipart/form-data")
		return
	}
	up := Upload{ChannelID: ch}
	stored := false
	abort := func(status int, code imv2.Code, msg string) {
		if stored {
			_ = h.files.Delete(context.WithoutCancel(ctx), ch, up.File.FileRef)
		}
		h.failUpload(w, r, status, code, msg)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			h.uploadErr(abort, err)
			return
		}
		switch part.FormName() {
		case "file":
			if stored {
				abort(http.StatusBadRequest, CodeInvalidUpload, `more than one "file" part`)
				return
			}
			bodyCap.left += h.cfg.MaxUploadBytes // the file's own room, past its headers
			capped := &capReader{r: part, left: h.cfg.MaxUploadBytes}
			up.File, err = put(part.FileName(), part.Header.Get("Content-Type"), capped)
			if err != nil {
				h.uploadErr(abort, err)
				return
			}
			stored = true
		case "recipient_ref", "reply_token":
			v, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
			if err != nil {
				h.uploadErr(abort, err)
				return
			}
			if len(v) > maxFieldBytes {
				abort(http.StatusBadRequest, CodeInvalidUpload, part.FormName()+" is too long")
				return
			}
			if part.FormName() == "recipient_ref" {
				up.RecipientRef = string(v)
			} else {
				up.ReplyToken = string(v)
			}
		default:
			// Unknown fields are skipped; MaxBytesReader bounds them.
			if _, err := io.Copy(io.Discard, part); err != nil {
				h.uploadErr(abort, err)
				return
			}
		}
	}
	if !stored {
		h.fail(w, r, http.StatusBadRequest, CodeInvalidUpload, `multipart field "file" is required`)
		return
	}
	if h.cfg.OnUpload != nil {
		if err := h.cfg.OnUpload(ctx, up); err != nil {
			h.log.Warn("connector: upload hook failed", "path", r.URL.Path, "err", err)
			abort(http.StatusInternalServerError, CodeUploadFailed, "upload could not be processed")
			return
		}
	}
	h.log.Debug("connector: upload stored", "file_ref", up.File.FileRef, "bytes", up.File.ByteSize)
	body, _ := json.Marshal(uploadResponse{
		FileRef:   up.File.FileRef,
		FileType:  up.File.Type,
		Filename:  up.File.Filename,
		ByteSize:  up.File.ByteSize,
		ExpiresAt: up.File.ExpiresAt.UnixMilli(),
	})
	h.writeJSON(w, http.StatusOK, body)
}

// minDeadlineBytes is the size below which an upload body gets the same
// read deadline as one of this size (about 9 s at the defaults), so a small
// body on a slow link is not cut by its own smallness.
const minDeadlineBytes = 1 << 20

// uploadDeadline is the time allowed to read an upload body of size bytes
// (-1: unknown, as for a chunked body, which may be as large as the cap):
// UploadTimeout for the largest body allowed, in proportion below it. The
// slowest link served is thus the same for every size (about 110 KiB/s at
// the defaults), and a stalled small body is cut in seconds, not minutes.
func (h *Handler) uploadDeadline(size int64) time.Duration {
	if size < 0 || size > h.maxBody {
		size = h.maxBody
	}
	size = max(size, min(minDeadlineBytes, h.maxBody))
	return time.Duration(float64(h.cfg.UploadTimeout) * float64(size) / float64(h.maxBody))
}

// pacedBody moves an upload's read deadline as its bytes arrive: the
// share of minDeadlineBytes from the start, plus the share of every byte
// read, never past uploadDeadline of the declared size. A body must so
// keep up the slowest rate served (maxBody per UploadTimeout) on average;
// a trickle that declared a large size is cut after the first share
// instead of holding an upload slot for the whole UploadTimeout.
type pacedBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	last  time.Time // deadline set last
	limit time.Time // uploadDeadline of the declared size
	read  int64
	h     *Handler
}

func (h *Handler) newPacedBody(w http.ResponseWriter, body io.ReadCloser, size int64) *pacedBody {
	now := h.netNow()
	p := &pacedBody{ReadCloser: body, rc: http.NewResponseController(w), start: now, limit: now.Add(h.uploadDeadline(size)), h: h}
	p.set()
	return p
}

func (p *pacedBody) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	if n > 0 {
		p.read += int64(n)
		p.set()
	}
	return n, err
}

// set sets the deadline the bytes read so far earned; at most once per
// 64 KiB or so it moves, as a change under a second is not worth a call.
func (p *pacedBody) set() {
	h := p.h
	earned := time.Duration(float64(h.cfg.UploadTimeout) * float64(min(minDeadlineBytes, h.maxBody)+p.read) / float64(h.maxBody))
	d := p.start.Add(earned)
	if d.After(p.limit) {
		d = p.limit
	}
	if !p.last.IsZero() && d.Sub(p.last) < time.Second && !d.Equal(p.limit) {
		return
	}
	if d.Equal(p.last) {
		return
	}
	p.last = d
	_ = p.rc.SetReadDeadline(d)
}

// failUpload is fail with "Retry-After: 1" on a 503 (busy or full: both
// clear as uploads finish or files expire).
func (h *Handler) failUpload(w http.ResponseWriter, r *http.Request, status int, code imv2.Code, msg string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	h.fail(w, r, status, code, msg)
}

// uploadErr maps a body or store error to a status.
func (h *Handler) uploadErr(abort func(int, imv2.Code, string), err error) {
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr), errors.Is(err, ErrFileTooLarge):
		abort(http.StatusRequestEntityTooLarge, CodeFileTooLarge, "upload is over the size limit")
	case errors.Is(err, ErrStoreFull):
		abort(http.StatusServiceUnavailable, CodeStoreFull, "file store is full, retry later")
	case errors.Is(err, imv2.ErrClosed):
		abort(http.StatusServiceUnavailable, CodeStoreFull, "file store is closed")
	case errors.Is(err, &imv2.Error{Code: imv2.CodeInvalidPacket}), isChannelIDErr(err):
		abort(http.StatusBadRequest, CodeInvalidUpload, "invalid upload")
	default:
		h.log.Warn("connector: upload failed", "err", err)
		abort(http.StatusBadRequest, CodeInvalidUpload, "upload body could not be read")
	}
}

func isChannelIDErr(err error) bool {
	return errors.Is(err, &imv2.Error{Code: imv2.CodeChannelIDRequired})
}

// capReader fails with ErrFileTooLarge once more than left bytes were read,
// whatever cap the store applies itself.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, ErrFileTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, ErrFileTooLarge
	}
	return n, err
}

// phasedReader caps the body in phases: formOverhead for everything up to
// the file part (so part headers, which multipart reads with a 10 MiB cap
// of its own, cannot grow past it), then MaxUploadBytes more once the
// file part starts.
type phasedReader struct {
	r    io.Reader
	left int64
}

func (p *phasedReader) Read(b []byte) (int, error) {
	if p.left <= 0 {
		return 0, &http.MaxBytesError{Limit: p.left}
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, err := p.r.Read(b)
	p.left -= int64(n)
	return n, err
}

// serveRef handles GET /files/refs/{file_ref} (T2, T3). ref already matched
// the ref alphabet. Order: signature (403), URL expiry (404), then the store
// (404 unknown or expired, 403 other channel).
func (h *Handler) serveRef(w http.ResponseWriter, r *http.Request, ref string) {
	ch, res := h.signer.verify(ref, r.URL.Query(), h.now())
	switch res {
	case urlBadSig:
		h.fail(w, r, http.StatusForbidden, CodeForbidden, "missing or invalid signature")
		return
	case urlExpired:
		h.fail(w, r, http.StatusNotFound, CodeFileNotFound, "download URL expired")
		return
	}
	markAuthenticated(r.Context()) // a valid signature is the download's credential
	rc, info, err := h.files.Open(r.Context(), ch, ref)
	switch {
	case errors.Is(err, ErrFileNotFound):
		h.fail(w, r, http.StatusNotFound, CodeFileNotFound, "file_ref is unknown or expired")
		return
	case errors.Is(err, ErrWrongChannel):
		h.fail(w, r, http.StatusForbidden, CodeWrongChannel, "file_ref belongs to another channel")
		return
	case err != nil:
		h.log.Warn("connector: open file failed", "file_ref", ref, "err", err)
		h.fail(w, r, http.StatusInternalServerError, CodeFileNotFound, "file could not be opened")
		return
	}
	defer rc.Close()
	_ = http.NewResponseController(w).SetWriteDeadline(h.netNow().Add(h.cfg.DownloadTimeout))
	hd := w.Header()
	mt := info.MimeType
	if mt == "" {
		mt = "application/octet-stream"
	}
	hd.Set("Content-Type", mt)
	hd.Set("Content-Length", strconv.FormatInt(info.ByteSize, 10))
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": cleanFilename(info.Filename)}))
	// The URL is a bearer capability and the bytes are user content: no
	// caching, no referrer, no sniffing, no script on this origin.
	hd.Set("Cache-Control", "private, no-store")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, rc); err != nil {
		h.log.Debug("connector: download interrupted", "file_ref", ref, "err", err)
	}
}

// DownloadURL returns the relative, signed URI of fileRef for channelID,
// valid for HandlerConfig.URLTTL (T3): "/files/refs/{file_ref}?ch=…&exp=…&sig=…".
// Resolve it against the Connector base URL (the data plane sends it
// as-is in files[].download_url, M6). It does not look the file up: a URL
// for an unknown ref or an invalid channel is simply refused when used.
func (h *Handler) DownloadURL(channelID, fileRef string) string {
	return h.signer.url(fileRef, channelID, h.now().Add(h.cfg.URLTTL))
}

// OfferFile stores a user's file for channelID and returns the imv2.File to
// put in a chat.message to xAgent (M6): type, file_ref, metadata and a
// signed download_url valid as long as the file (at most HandlerConfig.URLTTL).
func (h *Handler) OfferFile(ctx context.Context, channelID, filename, mimeType string, r io.Reader) (imv2.File, error) {
	if !validChannelID(channelID) {
		return imv2.File{}, imv2.Errorf(imv2.CodeChannelIDRequired, "connector: invalid connector_channel_id")
	}
	info, err := h.files.Put(ctx, channelID, filename, mimeType, &capReader{r: r, left: h.cfg.MaxUploadBytes})
	if err != nil {
		return imv2.File{}, err
	}
	exp := h.now().Add(h.cfg.URLTTL)
	if info.ExpiresAt.Before(exp) {
		exp = info.ExpiresAt
	}
	return imv2.File{
		Type:        info.Type,
		FileRef:     info.FileRef,
		Filename:    info.Filename,
		MimeType:    info.MimeType,
		ByteSize:    info.ByteSize,
		ExpiresAt:   info.ExpiresAt.UnixMilli(),
		DownloadURL: h.signer.url(info.FileRef, channelID, exp),
	}, nil
}

// OpenFile opens a stored file of channelID, for a Target posting a final
// whose files xAgent uploaded first (M7).
func (h *Handler) OpenFile(ctx context.Context, channelID, fileRef string) (io.ReadCloser, FileInfo, error) {
	if !validRef(fileRef) {
		return nil, FileInfo{}, ErrFileNotFound
	}
	return h.files.Open(ctx, channelID, fileRef)
}

// acceptsUploads is the kit's HandlerConfig.ChannelOpen: the channel is open here
// or, with a Relay (replicas on one Store), issued: xAgent may hold it
// open on another replica and upload here. A Store error refuses.
func (c *Connector) acceptsUploads(ctx context.Context, channelID string) bool {
	if c.server.IsOpen(channelID) {
		return true
	}
	if c.relay == nil {
		return false
	}
	ok, err := c.store.Known(ctx, channelID)
	return err == nil && ok
}

// Files returns the FileStore the Handler uses.
func (h *Handler) Files() FileStore { return h.files }

func (h *Handler) now() time.Time { return h.cfg.Clock.Now() }
