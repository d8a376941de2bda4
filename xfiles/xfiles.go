package xfiles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/xagentkit/imv2"
)

// Defaults and bounds.
const (
	// DefaultMaxBytes caps a download when Fetch is given maxBytes <= 0.
	DefaultMaxBytes = 32 << 20
	// DefaultTimeout bounds a call whose ctx has no deadline.
	DefaultTimeout = 2 * time.Minute
	// MaxRedirects bounds the redirects Fetch follows.
	MaxRedirects = 10
	// maxResponseBytes caps a JSON response (upload result or error).
	maxResponseBytes = 64 << 10
)

// Errors for errors.Is. Returned errors wrap them, marked Permanent.
var (
	// ErrTooLarge: the file is over the size cap.
	ErrTooLarge = errors.New("xfiles: file is over the size limit")
	// ErrRefusedURL: a base URL, download_url or redirect target was refused.
	ErrRefusedURL = errors.New("xfiles: URL refused")
	// ErrUnguardableTransport: Fetch was given a client whose transport it
	// cannot keep off internal addresses (not an *http.Transport, or one
	// with DialTLSContext or DialTLS).
	ErrUnguardableTransport = errors.New("xfiles: transport cannot be guarded against internal addresses")
)

// HTTPError is a non-2xx answer. Code and Message come from the
// Connector's JSON error body when it sent one.
type HTTPError struct {
	StatusCode int
	Code       string
	Message    string
}

// Error returns the status, code and message; never a header or a key.
func (e *HTTPError) Error() string {
	s := fmt.Sprintf("xfiles: HTTP %d", e.StatusCode)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// readHTTPError builds an *HTTPError from resp and marks it: 408, 429,
// 5xx and 409 channel_not_open retryable, other statuses permanent; 413
// also matches ErrTooLarge. A 409 channel_not_open is a refusal for now:
// the Connector has not (yet, or no longer) the channel open on a
// connection, as during an xAgent reconnect; the upload succeeds once the
// channel is reopened (dataplane.Client.Upload waits for that).
func readHTTPError(resp *http.Response) error {
	e := &HTTPError{StatusCode: resp.StatusCode}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes)); err == nil && json.Unmarshal(b, &body) == nil {
		e.Code, e.Message = body.Error.Code, truncate(body.Error.Message, 256)
	}
	switch {
	case resp.StatusCode == http.StatusRequestEntityTooLarge:
		return imv2.Refused(fmt.Errorf("%w: %w", ErrTooLarge, e))
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500,
		resp.StatusCode == http.StatusConflict && e.Code == string(imv2.CodeChannelNotOpen):
		return imv2.NotPosted(e)
	}
	return imv2.Refused(e)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// ParseBaseURL checks a Connector base URL (Common Protocol §3): http or
// https, a host, no user info, query or fragment; a path prefix is kept.
func ParseBaseURL(baseURL string) (*url.URL, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, imv2.Refused(fmt.Errorf("%w: base URL does not parse", ErrRefusedURL))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, imv2.Refused(fmt.Errorf("%w: base URL scheme %q is not http or https", ErrRefusedURL, u.Scheme))
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return nil, imv2.Refused(fmt.Errorf("%w: base URL needs a host and no user info, query or fragment", ErrRefusedURL))
	}
	return u, nil
}

// joinPath appends ref's path (escaping kept) and query to base's path
// prefix.
func joinPath(base, ref *url.URL) *url.URL {
	u := *base
	u.Path = strings.TrimSuffix(base.Path, "/") + "/" + strings.TrimPrefix(ref.Path, "/")
	u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + "/" + strings.TrimPrefix(ref.EscapedPath(), "/")
	u.RawQuery = ref.RawQuery
	u.Fragment, u.RawFragment = "", ""
	return &u
}

// ResolveDownloadURL returns the URL Fetch would request for downloadURL
// (T4, M6). An absolute http or https URL is used as it is. A relative one
// is joined to baseURL's path prefix, so "/files/refs/x?sig=…" against
// "https://c.example/prefix" is "https://c.example/prefix/files/refs/x?sig=…";
// it must hold no "." or ".." segment (after percent-decoding). Anything
// else is ErrRefusedURL.
func ResolveDownloadURL(baseURL, downloadURL string) (*url.URL, error) {
	if err := imv2.CheckDownloadURL(downloadURL); err != nil {
		return nil, imv2.Refused(fmt.Errorf("%w: %w", ErrRefusedURL, err))
	}
	ref, err := url.Parse(downloadURL)
	if err != nil {
		return nil, imv2.Refused(fmt.Errorf("%w: download_url does not parse", ErrRefusedURL))
	}
	if ref.IsAbs() {
		ref.Fragment, ref.RawFragment = "", ""
		return ref, nil
	}
	if ref.Opaque != "" || ref.Host != "" || ref.User != nil {
		return nil, imv2.Refused(fmt.Errorf("%w: download_url is not a path reference", ErrRefusedURL))
	}
	for _, seg := range strings.Split(ref.Path, "/") {
		if seg == "." || seg == ".." {
			return nil, imv2.Refused(fmt.Errorf("%w: download_url has a dot segment", ErrRefusedURL))
		}
	}
	base, err := ParseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	return joinPath(base, ref), nil
}

// hostPort is u's host with the scheme's default port made explicit, as
// the transport dials it.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// withTimeout gives ctx DefaultTimeout when it has no deadline.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// GuardedClient returns a copy of client (nil: http.DefaultClient) for
// downloads from URLs another party chose, on Fetch's guard: its
// transport dials no special-purpose address (loopback, private,
// link-local …) but the host:ports in trusted, dialed as given (an
// operator's own service on the local network), and uses no proxy, the
// environment's included; redirects go only to http and https, without
// user info, never from https to http, at most MaxRedirects, and then
// pass client's own CheckRedirect (where a caller checks each hop's
// host). The transport is the copy's own: CloseIdleConnections it when
// done. client's transport must be nil or an *http.Transport without
// DialTLSContext (ErrUnguardableTransport).
func GuardedClient(client *http.Client, trusted ...string) (*http.Client, error) {
	return fetchClient(client, trusted, false)
}

// fetchClient copies c (the caller's client stays untouched) with a
// CheckRedirect that allows only http and https targets without user info
// and no https → http downgrade, at most MaxRedirects, then defers to c's
// own policy; and with a transport that dials no internal address but the
// exempt host:ports, and uses no proxy unless allowProxy (guard.go).
func fetchClient(c *http.Client, exempt []string, allowProxy bool) (*http.Client, error) {
	if c == nil {
		c = http.DefaultClient
	}
	cc := *c
	rt, err := guardTransport(c.Transport, exempt, allowProxy)
	if err != nil {
		return nil, err
	}
	cc.Transport = rt
	prev := c.CheckRedirect
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if s := req.URL.Scheme; s != "http" && s != "https" {
			return imv2.Refused(fmt.Errorf("%w: redirect to scheme %q", ErrRefusedURL, s))
		}
		if len(via) > 0 && via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme == "http" {
			return imv2.Refused(fmt.Errorf("%w: redirect from https to http", ErrRefusedURL))
		}
		if req.URL.User != nil {
			return imv2.Refused(fmt.Errorf("%w: redirect carries user info", ErrRefusedURL))
		}
		if len(via) >= MaxRedirects {
			return imv2.Refused(fmt.Errorf("%w: more than %d redirects", ErrRefusedURL, MaxRedirects))
		}
		if prev != nil {
			return prev(req, via)
		}
		return nil
	}
	return &cc, nil
}

// Fetch downloads the bytes of f, a file of a chat.message from the
// Connector (M6, T4). baseURL is the Connector base URL of the catalog; a
// relative download_url is resolved against it only. At most maxBytes are
// read (DefaultMaxBytes if maxBytes <= 0): a larger file is ErrTooLarge and
// no data. client may be nil (http.DefaultClient); it is copied, not
// changed. No proxy is used (FetchRequest.AllowProxy). The timeout comes
// from ctx (DefaultTimeout without a deadline).
func Fetch(ctx context.Context, client *http.Client, baseURL string, f imv2.File, maxBytes int64) ([]byte, error) {
	q := FetchRequest{BaseURL: baseURL, File: f, MaxBytes: maxBytes}
	return q.Do(ctx, client)
}

// FetchRequest is one download with every optional field; Fetch is the
// short form.
type FetchRequest struct {
	BaseURL  string    // Connector base URL (catalog), http or https
	File     imv2.File // the chat.message's files[] entry
	MaxBytes int64     // the size cap; <= 0 is DefaultMaxBytes
	// AllowProxy lets the client's transport use its Proxy (for the
	// default transport: HTTP_PROXY, HTTPS_PROXY, NO_PROXY). Off by
	// default because a proxy resolves the target's name itself: the
	// addresses of the target are checked before the request goes to the
	// proxy, but a DNS answer that changes between that lookup and the
	// proxy's reaches whatever it names. Turn it on only where the proxy
	// itself refuses internal destinations.
	AllowProxy bool
}

// Do performs the download (see Fetch).
func (q *FetchRequest) Do(ctx context.Context, client *http.Client) ([]byte, error) {
	baseURL, f, maxBytes := q.BaseURL, q.File, q.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if f.ByteSize > maxBytes {
		return nil, imv2.Refused(fmt.Errorf("%w: byte_size %d over %d", ErrTooLarge, f.ByteSize, maxBytes))
	}
	target, err := ResolveDownloadURL(baseURL, f.DownloadURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return nil, imv2.Refused(fmt.Errorf("%w: %w", ErrRefusedURL, err))
	}
	base, err := ParseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	fc, err := fetchClient(client, []string{hostPort(base)}, q.AllowProxy)
	if err != nil {
		return nil, imv2.Refused(err)
	}
	defer fc.CloseIdleConnections() // the guarded transport is this call's alone
	resp, err := fc.Do(req)
	if err != nil {
		if errors.Is(err, ErrRefusedURL) {
			return nil, imv2.Refused(err)
		}
		return nil, imv2.NotPosted(fmt.Errorf("xfiles: fetch: %w", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, readHTTPError(resp)
	}
	if resp.ContentLength > maxBytes {
		return nil, imv2.Refused(fmt.Errorf("%w: Content-Length %d over %d", ErrTooLarge, resp.ContentLength, maxBytes))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, imv2.NotPosted(fmt.Errorf("xfiles: fetch body: %w", err))
	}
	if int64(len(data)) > maxBytes {
		return nil, imv2.Refused(fmt.Errorf("%w: body over %d bytes", ErrTooLarge, maxBytes))
	}
	return data, nil
}
