package xfiles_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/xfiles"
)

const apiKey = "sk-xfiles-test-key-0123456789abcdef"

func card() *protocol.Card {
	return &protocol.Card{
		Schema: protocol.CardSchema, ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{BuildTime: "2607241200"},
		ConnectorCardID: "im.console",
		Connector:       protocol.CardInfo{Name: "Console", Version: "0.1.0"},
		Supports:        protocol.Supports{TargetTypes: []string{"im"}, Profiles: []string{imv2.ProfileIMv2}},
	}
}

// connectorServer runs a connector.Handler, mounted under prefix when set.
func connectorServer(t *testing.T, prefix string, mod func(*connector.HandlerConfig)) (*connector.Handler, *httptest.Server, string) {
	t.Helper()
	cfg := connector.HandlerConfig{Card: card(), APIKey: apiKey, Clock: fakeclock.New(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC))}
	if mod != nil {
		mod(&cfg)
	}
	h, err := connector.NewHandler(cfg)
	require.NoError(t, err)
	var handler http.Handler = h
	if prefix != "" {
		mux := http.NewServeMux()
		mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
		handler = mux
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return h, srv, srv.URL + prefix
}

func random(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func TestUpload_M7_T1_RoundTrip5MiB(t *testing.T) {
	for _, prefix := range []string{"", "/connector/v1"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			var hooked connector.Upload
			h, srv, base := connectorServer(t, prefix, func(c *connector.HandlerConfig) {
				c.OnUpload = func(_ context.Context, u connector.Upload) error { hooked = u; return nil }
			})
			data := random(t, 5<<20)
			res, err := xfiles.Upload(context.Background(), srv.Client(), base, apiKey, "cch_1", "report.pdf", bytes.NewReader(data))
			require.NoError(t, err)
			assert.Equal(t, imv2.FileFile, res.FileType)
			assert.Equal(t, "report.pdf", res.Filename)
			assert.Equal(t, int64(5<<20), res.ByteSize)
			assert.NotEmpty(t, res.FileRef)
			assert.Equal(t, "application/pdf", hooked.File.MimeType)

			// The result goes into an assistant final as is (M7).
			m := imv2.ChatMessage{MessageID: "msg_1", Files: []imv2.File{res.File()}}
			require.NoError(t, m.Validate(imv2.ToConnector))
			assert.Empty(t, res.File().DownloadURL)

			rc, _, err := h.OpenFile(context.Background(), "cch_1", res.FileRef)
			require.NoError(t, err)
			got, err := io.ReadAll(rc)
			require.NoError(t, err)
			require.NoError(t, rc.Close())
			assert.True(t, bytes.Equal(data, got), "bytes differ")
		})
	}
}

func TestUpload_T1_OptionalFieldsReachHook(t *testing.T) {
	var hooked connector.Upload
	_, srv, base := connectorServer(t, "", func(c *connector.HandlerConfig) {
		c.OnUpload = func(_ context.Context, u connector.Upload) error { hooked = u; return nil }
	})
	q := xfiles.UploadRequest{BaseURL: base, APIKey: apiKey, ChannelID: "cch_9", Filename: "a.png",
		MimeType: "image/png", RecipientRef: "user-1", ReplyToken: "rt-1", Body: strings.NewReader("png?")}
	res, err := q.Do(context.Background(), srv.Client())
	require.NoError(t, err)
	assert.Equal(t, imv2.FileImage, res.FileType)
	assert.Equal(t, "cch_9", hooked.ChannelID)
	assert.Equal(t, "user-1", hooked.RecipientRef)
	assert.Equal(t, "rt-1", hooked.ReplyToken)
}

// waitingClient is srv's client with a transport that waits for the
// Connector's go-ahead on "Expect: 100-continue" (srv.Client's sends the
// body at once). The minute is a bound for a stuck server, never reached.
func waitingClient(t *testing.T, srv *httptest.Server) *http.Client {
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.ExpectContinueTimeout = time.Minute
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// watchedBody is a body of known size (Len) that counts the Reads reaching
// it; it has no WriteTo, so every byte goes through Read.
type watchedBody struct {
	r     *bytes.Reader
	reads atomic.Int64
}

func newWatchedBody(b []byte) *watchedBody { return &watchedBody{r: bytes.NewReader(b)} }

func (w *watchedBody) Len() int { return w.r.Len() }

func (w *watchedBody) Read(p []byte) (int, error) {
	w.reads.Add(1)
	return w.r.Read(p)
}

// TestUpload_T1_Errors also pins that a refusal on the headers costs no
// byte of the file: the body is never read, so no write into the
// connection the Connector closes after its answer can take the answer's
// place (it did about 1 run in 4 under -race, as a broken pipe).
func TestUpload_T1_Errors(t *testing.T) {
	ctx := context.Background()
	_, srv, base := connectorServer(t, "", func(c *connector.HandlerConfig) { c.MaxUploadBytes = 1 << 20 })
	client := waitingClient(t, srv)

	body := newWatchedBody([]byte("x"))
	_, err := xfiles.Upload(ctx, client, base, "sk-wrong", "cch_1", "a.txt", body)
	var he *xfiles.HTTPError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, http.StatusUnauthorized, he.StatusCode)
	assert.Equal(t, string(connector.CodeUnauthorized), he.Code)
	assert.False(t, imv2.SafeToRetry(err))
	assert.NotContains(t, err.Error(), "sk-wrong")
	assert.Zero(t, body.reads.Load(), "the file was read before the Connector's go-ahead")

	body = newWatchedBody(make([]byte, 2<<20))
	_, err = xfiles.Upload(ctx, client, base, apiKey, "cch_1", "big.bin", body)
	assert.ErrorIs(t, err, xfiles.ErrTooLarge)
	assert.False(t, imv2.SafeToRetry(err))
	assert.Zero(t, body.reads.Load(), "a declared size over the cap was sent anyway")

	_, err = xfiles.Upload(ctx, client, base, apiKey, "", "a.txt", strings.NewReader("x"))
	assert.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeChannelIDRequired})

	for _, bad := range []string{"ftp://h/", "file:///tmp", "http://user:pw@h/", "http://h/?q=1", "http://h/#f", "/relative", ""} {
		_, err = xfiles.Upload(ctx, client, bad, apiKey, "cch_1", "a.txt", strings.NewReader("x"))
		assert.ErrorIs(t, err, xfiles.ErrRefusedURL, bad)
	}
}

// TestUpload_T1_DeclaresKnownSizes: a body of known size is sent with its
// exact Content-Length (so the Connector can refuse it on the headers), one
// of unknown size chunked; both arrive whole, after the server's go-ahead.
func TestUpload_T1_DeclaresKnownSizes(t *testing.T) {
	data := random(t, 100<<10)
	f, err := os.CreateTemp(t.TempDir(), "up")
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	_, err = f.Write(data)
	require.NoError(t, err)
	_, err = f.Seek(1000, io.SeekStart) // the upload sends what is left past the offset
	require.NoError(t, err)

	type got struct {
		declared int64
		file     []byte
	}
	gots := make(chan got, 1)
	s := newHitServer(t, func(w http.ResponseWriter, r *http.Request) {
		g := got{declared: r.ContentLength}
		mr, err := r.MultipartReader()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			if b, _ := io.ReadAll(p); p.FormName() == "file" {
				g.file = b
			}
		}
		gots <- g
		_, _ = io.WriteString(w, `{"file_ref":"f1","file_type":"file","filename":"a","byte_size":1,"expires_at":1}`)
	})
	for _, c := range []struct {
		name  string
		body  io.Reader
		want  []byte
		known bool
	}{
		{"bytes.Reader", bytes.NewReader(data), data, true},
		{"strings.Reader", strings.NewReader(string(data)), data, true},
		{"os.File past offset", f, data[1000:], true},
		{"plain reader", struct{ io.Reader }{bytes.NewReader(data)}, data, false},
	} {
		q := xfiles.UploadRequest{BaseURL: s.URL, ChannelID: "cch_1", Filename: "a.bin", RecipientRef: "r1", ReplyToken: "tok", Body: c.body}
		_, err := q.Do(context.Background(), waitingClient(t, s.Server))
		require.NoError(t, err, c.name)
		g := <-gots
		assert.True(t, bytes.Equal(c.want, g.file), c.name)
		if c.known { // a wrong length fails the request in net/http
			assert.Positive(t, g.declared, c.name)
		} else {
			assert.Equal(t, int64(-1), g.declared, c.name)
		}
	}
}

func TestUpload_T1_NeverFollowsRedirectWithKey(t *testing.T) {
	other := newHitServer(t, func(w http.ResponseWriter, r *http.Request) {})
	for _, code := range []int{http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redir := newHitServer(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Redirect(w, r, other.URL+"/files/uploads", code)
		})
		_, err := xfiles.Upload(context.Background(), redir.Client(), redir.URL, apiKey, "cch_1", "a.txt", strings.NewReader("x"))
		var he *xfiles.HTTPError
		require.ErrorAs(t, err, &he, code)
		assert.Equal(t, code, he.StatusCode)
		assert.Equal(t, int64(1), redir.auth.Load(), "the key went to the base URL")
	}
	assert.Zero(t, other.hits.Load(), "no redirect was followed")
}

func TestFetch_M6_T4_OfferedFileRoundTrip(t *testing.T) {
	for _, prefix := range []string{"", "/p"} {
		h, srv, base := connectorServer(t, prefix, nil)
		data := random(t, 1<<20)
		f, err := h.OfferFile(context.Background(), "cch_1", "pic.jpg", "image/jpeg", bytes.NewReader(data))
		require.NoError(t, err)
		got, err := xfiles.Fetch(context.Background(), srv.Client(), base, f, 2<<20)
		require.NoError(t, err, prefix)
		assert.True(t, bytes.Equal(data, got), prefix)
	}
}

// hitServer counts requests and remembers whether any carried Authorization.
type hitServer struct {
	*httptest.Server
	hits, auth atomic.Int64
}

func newHitServer(t *testing.T, h http.HandlerFunc) *hitServer {
	s := &hitServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if r.Header.Get("Authorization") != "" {
			s.auth.Add(1)
		}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestFetch_T4_M6_RefusesOtherSchemes(t *testing.T) {
	s := newHitServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "x") })
	for _, u := range []string{
		"file:///etc/passwd", "data:text/plain;base64,eA==", "ftp://" + s.Listener.Addr().String() + "/x",
		"javascript:alert(1)", "//" + s.Listener.Addr().String() + "/x", "gopher://h/x",
		"http://user:pw@" + s.Listener.Addr().String() + "/x", "", "/files/../x", "/files/%2e%2e/x", "./x",
	} {
		_, err := xfiles.Fetch(context.Background(), s.Client(), s.URL, imv2.File{Type: "file", FileRef: "f", DownloadURL: u}, 0)
		assert.ErrorIs(t, err, xfiles.ErrRefusedURL, u)
		assert.False(t, imv2.SafeToRetry(err), u)
	}
	assert.Zero(t, s.hits.Load(), "no refused URL was requested")
}

func TestFetch_T4_RedirectsOnlyToHTTP(t *testing.T) {
	final := newHitServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	s := newHitServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/x" {
			_, _ = io.WriteString(w, "same host")
			return
		}
		to := r.URL.Query().Get("to")
		w.Header().Set("Location", to)
		w.WriteHeader(http.StatusFound)
	})
	for _, to := range []string{"file:///etc/passwd", "data:text/plain,hi", "ftp://example.com/x", "gopher://example.com/"} {
		f := imv2.File{Type: "file", FileRef: "f", DownloadURL: "/r?to=" + to}
		data, err := xfiles.Fetch(context.Background(), s.Client(), s.URL, f, 0)
		assert.ErrorIs(t, err, xfiles.ErrRefusedURL, to)
		assert.Nil(t, data)
	}
	// A redirect within the Connector's host is followed …
	f := imv2.File{Type: "file", FileRef: "f", DownloadURL: "/r?to=" + s.URL + "/x"}
	data, err := xfiles.Fetch(context.Background(), s.Client(), s.URL, f, 0)
	require.NoError(t, err)
	assert.Equal(t, "same host", string(data))
	// … one to another internal address (here: another loopback port) is not.
	f = imv2.File{Type: "file", FileRef: "f", DownloadURL: "/r?to=" + final.URL + "/x"}
	_, err = xfiles.Fetch(context.Background(), s.Client(), s.URL, f, 0)
	assert.ErrorIs(t, err, xfiles.ErrRefusedURL, "T4: no internal address but the Connector's")
	assert.Zero(t, final.hits.Load())
	// The caller's client is not changed.
	assert.Nil(t, s.Client().CheckRedirect)
}

func TestFetch_T4_SizeCap(t *testing.T) {
	const max = 1000
	s := newHitServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Get("lie") != "" { // a large Content-Length is refused before reading
			w.Header().Set("Content-Length", strconv.Itoa(1<<30))
			_, _ = w.Write(make([]byte, 10))
			return
		}
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		} else {
			w.(http.Flusher).Flush() // no Content-Length: the cap must hold while reading
		}
		_, _ = w.Write(make([]byte, n))
	})
	fetch := func(q string, size int64) ([]byte, error) {
		f := imv2.File{Type: "file", FileRef: "f", ByteSize: size, DownloadURL: "/f?" + q}
		return xfiles.Fetch(context.Background(), s.Client(), s.URL, f, max)
	}
	data, err := fetch("n=1000", 0)
	require.NoError(t, err)
	assert.Len(t, data, max)
	for _, q := range []string{"n=1001", "n=1001&chunked=1", "n=50000&chunked=1", "lie=1"} {
		data, err = fetch(q, 0)
		assert.ErrorIs(t, err, xfiles.ErrTooLarge, q)
		assert.Nil(t, data, q)
	}
	before := s.hits.Load()
	_, err = fetch("n=1", max+1) // declared byte_size over the cap: not even requested
	assert.ErrorIs(t, err, xfiles.ErrTooLarge)
	assert.Equal(t, before, s.hits.Load())
	assert.Zero(t, s.auth.Load(), "Fetch never sends Authorization")
}

func TestFetch_T4_RelativeResolvesAgainstBaseOnly(t *testing.T) {
	for _, c := range []struct{ base, dl, want string }{
		{"https://c.example", "/files/refs/x?sig=1", "https://c.example/files/refs/x?sig=1"},
		{"https://c.example/pre", "/files/refs/x?sig=1", "https://c.example/pre/files/refs/x?sig=1"},
		{"https://c.example/pre/", "/files/refs/x", "https://c.example/pre/files/refs/x"},
		{"http://c.example:8080/pre", "files/refs/x", "http://c.example:8080/pre/files/refs/x"},
		{"https://c.example", "/files/refs/a%2Fb", "https://c.example/files/refs/a%2Fb"},
		{"https://c.example", "https://cdn.example/f?x=1", "https://cdn.example/f?x=1"},
		{"https://c.example", "/files/refs/x#frag", "https://c.example/files/refs/x"},
	} {
		u, err := xfiles.ResolveDownloadURL(c.base, c.dl)
		require.NoError(t, err, c.dl)
		assert.Equal(t, c.want, u.String(), c.dl)
	}
	for _, c := range []struct{ base, dl string }{
		{"ftp://c.example", "/files/refs/x"},
		{"https://c.example?x=1", "/files/refs/x"},
		{"https://u:p@c.example", "/files/refs/x"},
		{"", "/files/refs/x"},
		{"https://c.example", "/files/refs/../../admin"},
		{"https://c.example", "/files/refs/%2e%2e/admin"},
		{"https://c.example", "/files/refs/a%2f..%2fb"},
		{"https://c.example", "//evil.example/x"},
	} {
		_, err := xfiles.ResolveDownloadURL(c.base, c.dl)
		assert.ErrorIs(t, err, xfiles.ErrRefusedURL, "%s + %s", c.base, c.dl)
	}

	// Live: a relative URL goes to the base server, never to another one.
	base := newHitServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.Path) })
	other := newHitServer(t, func(w http.ResponseWriter, r *http.Request) {})
	data, err := xfiles.Fetch(context.Background(), base.Client(), base.URL+"/pre", imv2.File{Type: "file", FileRef: "f", DownloadURL: "/files/refs/x"}, 0)
	require.NoError(t, err)
	assert.Equal(t, "/pre/files/refs/x", string(data))
	assert.Equal(t, int64(1), base.hits.Load())
	assert.Zero(t, other.hits.Load())
}

func TestFetch_T4_StatusAndContextErrors(t *testing.T) {
	started := make(chan struct{}, 1)
	s := newHitServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			http.Error(w, `{"error":{"code":"file_not_found"}}`, http.StatusNotFound)
		case "/503":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/slow":
			started <- struct{}{}
			<-r.Context().Done()
		}
	})
	get := func(ctx context.Context, p string) error {
		_, err := xfiles.Fetch(ctx, s.Client(), s.URL, imv2.File{Type: "file", FileRef: "f", DownloadURL: p}, 0)
		return err
	}
	err := get(context.Background(), "/404")
	var he *xfiles.HTTPError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "file_not_found", he.Code)
	assert.False(t, imv2.SafeToRetry(err))
	assert.True(t, imv2.SafeToRetry(get(context.Background(), "/503")))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- get(ctx, "/slow") }()
	<-started
	cancel()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Fetch did not return after its context ended")
	}
	assert.ErrorIs(t, err, context.Canceled)
}

func ExampleUpload() {
	h, err := connector.NewHandler(connector.HandlerConfig{Card: card(), APIKey: "change-me"})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	res, err := xfiles.Upload(context.Background(), srv.Client(), srv.URL, "change-me", "cch_1",
		"hello.txt", strings.NewReader("hello, world"))
	if err != nil {
		panic(err)
	}
	f := res.File() // goes into the assistant final's files[] (M7)
	fmt.Println(f.Type, f.Filename, f.ByteSize, strings.HasPrefix(f.FileRef, "file_"))
	// Output: file hello.txt 12 true
}

func ExampleFetch() {
	h, err := connector.NewHandler(connector.HandlerConfig{Card: card(), APIKey: "change-me"})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The Connector offers a user's file; xAgent receives f in a chat.message.
	f, err := h.OfferFile(context.Background(), "cch_1", "note.txt", "text/plain", strings.NewReader("from the user"))
	if err != nil {
		panic(err)
	}
	data, err := xfiles.Fetch(context.Background(), srv.Client(), srv.URL, f, 1<<20)
	if errors.Is(err, xfiles.ErrTooLarge) {
		fmt.Println("too large")
		return
	}
	if err != nil {
		panic(err)
	}
	fmt.Println(string(data))
	// Output: from the user
}

func TestFetch_T4_AbsoluteURLToInternalAddressRefused(t *testing.T) {
	s := newHitServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "x") })
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/x", "http://[::1]:9/x", "http://localhost:9/x"} {
		_, err := xfiles.Fetch(context.Background(), s.Client(), s.URL, imv2.File{Type: "file", FileRef: "f", DownloadURL: u}, 0)
		assert.ErrorIs(t, err, xfiles.ErrRefusedURL, u)
	}
	assert.Zero(t, s.hits.Load())
}
