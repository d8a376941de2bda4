package xmppbridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/upload"
)

// say sends text to the conversation key as a new message with stanza ID
// id (also its XEP-0359 origin-id), with chat state active, and waits for
// the server to take it.
func (br *Bridge) say(ctx context.Context, key, id, text string) error {
	to, typ := peer(key)
	return br.link.send(ctx, true, message{ID: id, To: to, Type: typ, Body: text, OriginID: &idAttr{id}, Other: state("active")})
}

// correct replaces the text of the message whose stanza ID is orig
// (XEP-0308 Last Message Correction: every correction names the original
// message, never an earlier correction) and waits for the server to take
// it. Shown again, a correction shows the same text: no second message.
func (br *Bridge) correct(ctx context.Context, key, orig, text string) error {
	to, typ := peer(key)
	id := newID()
	return br.link.send(ctx, true, message{ID: id, To: to, Type: typ, Body: text, Replace: &idAttr{orig}, OriginID: &idAttr{id}})
}

// chatState sends an XEP-0085 chat state: composing while the agent
// thinks or runs a tool, active when it is idle.
func (br *Bridge) chatState(ctx context.Context, key, name string) error {
	to, typ := peer(key)
	return br.link.send(ctx, false, message{To: to, Type: typ, Other: state(name)})
}

// attach uploads a file with XEP-0363 HTTP File Upload (a slot from the
// upload service, then an HTTP PUT) and sends its URL as a message whose
// body is the URL and whose XEP-0066 out-of-band data names it, the way
// XMPP clients share files. A failed upload has shown nothing.
func (br *Bridge) attach(ctx context.Context, key, id, name, mime string, size int64, r io.Reader) error {
	s, err := br.link.current()
	if err != nil {
		return notPosted(err)
	}
	service, err := jid.Parse(br.cfg.UploadService)
	if err != nil {
		return permanent(fmt.Errorf("xmppbridge: UploadService: %w", err))
	}
	mime = cmp.Or(mime, "application/octet-stream")
	slot, err := upload.GetSlot(ctx, upload.File{Name: name, Size: int(size), Type: mime}, service, s)
	if err != nil {
		return notPosted(fmt.Errorf("xmpp: upload slot: %w", err))
	}
	req, err := slot.Put(ctx, r)
	if err != nil {
		return notPosted(err)
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", mime)
	resp, err := br.cfg.HTTPClient.Do(req)
	if err != nil {
		return notPosted(fmt.Errorf("xmpp: upload: %w", err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		err := fmt.Errorf("xmpp: upload: HTTP %d", resp.StatusCode)
		if resp.StatusCode == http.StatusRequestEntityTooLarge || resp.StatusCode == http.StatusForbidden {
			return permanent(err)
		}
		return notPosted(err)
	}
	url := slot.GetURL.String()
	to, typ := peer(key)
	return br.link.send(ctx, true, message{ID: id, To: to, Type: typ, Body: url, OriginID: &idAttr{id}, OOB: &oob{URL: url}})
}

// fetch downloads an inbound file's URL, at most max bytes, from a host
// of Config.FileHosts only: a URL in a message is the sender's to choose,
// and the Connector must not fetch whatever it names.
func (br *Bridge) fetch(ctx context.Context, rawURL string, max int64) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil || !br.fileHost(req.URL.Host) || (req.URL.Scheme != "https" && req.URL.Scheme != "http") {
		return nil, "", errors.New("xmppbridge: file URL not on an allowed host")
	}
	resp, err := br.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, "", fmt.Errorf("xmppbridge: file download: HTTP %d", resp.StatusCode)
	case err != nil:
		return nil, "", err
	case int64(len(data)) > max:
		return nil, "", errors.New("xmppbridge: shared file larger than the file limit")
	}
	return data, resp.Header.Get("Content-Type"), nil
}

func (br *Bridge) fileHost(host string) bool {
	for _, h := range br.cfg.FileHosts {
		if h == host {
			return true
		}
	}
	return false
}
