package connector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
)

const testKey = "sk-test-5e3cr3t-key-value-0123456789"

func testCard() *protocol.Card {
	return &protocol.Card{
		Schema:          protocol.CardSchema,
		ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{Version: "0.0.7", GitTag: "v0.0.7", GitRev: "abc1234", BuildTime: "2607241200"},
		ConnectorCardID: "im.console",
		Connector:       protocol.CardInfo{Name: "Console Connector", Version: "0.0.1", Vendor: "Example"},
		Supports: protocol.Supports{
			UserChannelMode: "single",
			TargetTypes:     []string{imv2.TargetTypeIM},
			Targets:         []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: "console", Label: "Console"}},
			Profiles:        []string{imv2.ProfileIMv2},
		},
		Tools: []protocol.Tool{{
			ToolID:      "console_message_send",
			Profile:     imv2.ProfileIMv2,
			InputSchema: json.RawMessage(`{"type":"object","required":["connector_channel_id"],"properties":{"connector_channel_id":{"type":"string"}}}`),
		}},
		Security: &protocol.Security{TrustLevel: "local", APIKeyRequired: true},
	}
}

// syncBuffer is a bytes.Buffer safe for the handler's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// countingStore counts calls into the store, to prove some requests never
// reach it.
type countingStore struct {
	connector.FileStore
	opens atomic.Int64
}

// Reserve passes a reservation through to a Reserver store, so the
// Handler under test reserves as it would without the wrapper.
func (c *countingStore) Reserve(ctx context.Context, ch string, n int64) (connector.Reservation, error) {
	return c.FileStore.(connector.Reserver).Reserve(ctx, ch, n)
}

func (c *countingStore) Open(ctx context.Context, ch, ref string) (io.ReadCloser, connector.FileInfo, error) {
	c.opens.Add(1)
	return c.FileStore.Open(ctx, ch, ref)
}

type env struct {
	h     *connector.Handler
	srv   *httptest.Server
	clock *fakeclock.Clock
	logs  *syncBuffer
	store *countingStore
	// bodies collects every response body read through do.
	bodies *syncBuffer
}

var epoch = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

// newEnv starts a Handler over httptest with a fake clock, a debug logger
// into a buffer and a counting MemoryFileStore. mod may change the HandlerConfig.
func newEnv(t *testing.T, mod func(*connector.HandlerConfig)) *env {
	t.Helper()
	e := &env{clock: fakeclock.New(epoch), logs: new(syncBuffer), bodies: new(syncBuffer)}
	cfg := connector.HandlerConfig{
		Card:     testCard(),
		Markdown: []byte("---\nname: connector-im-console\n---\n# Console\n"),
		APIKey:   testKey,
		WS: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "ws-reached")
		}),
		Clock:  e.clock,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&cfg)
	}
	if cfg.Files == nil {
		cfg.Files = connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{
			Clock: e.clock, TTL: cfg.FileTTL, MaxFileBytes: cfg.MaxUploadBytes,
		})
	}
	e.store = &countingStore{FileStore: cfg.Files}
	cfg.Files = e.store
	h, err := connector.NewHandler(cfg)
	require.NoError(t, err)
	e.h = h
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request to the test server; key "" sends no Authorization.
func (e *env) do(t *testing.T, method, path, key string, hdr map[string]string, body io.Reader) resp {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	_, _ = e.bodies.Write(b)
	for k, vs := range res.Header {
		_, _ = e.bodies.Write([]byte(k + ": " + strings.Join(vs, ",") + "\n"))
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// form builds a multipart body; file nil omits the file part.
type form struct {
	filename, mime string
	file           []byte
	fields         map[string]string
	twoFiles       bool
}

func (f form) encode(t *testing.T) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range f.fields {
		require.NoError(t, mw.WriteField(k, v))
	}
	n := 0
	if f.file != nil {
		n = 1
	}
	if f.twoFiles {
		n = 2
	}
	for i := 0; i < n; i++ {
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+f.filename+`"`)
		if f.mime != "" {
			h.Set("Content-Type", f.mime)
		}
		p, err := mw.CreatePart(h)
		require.NoError(t, err)
		_, err = p.Write(f.file)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return &buf, mw.FormDataContentType()
}

// upload posts f for channel with the test key.
func (e *env) upload(t *testing.T, channel string, f form) resp {
	t.Helper()
	body, ct := f.encode(t)
	hdr := map[string]string{"Content-Type": ct}
	if channel != "" {
		hdr[connector.HeaderChannelID] = channel
	}
	return e.do(t, http.MethodPost, "/files/uploads", testKey, hdr, body)
}

type uploadJSON struct {
	FileRef   string `json:"file_ref"`
	FileType  string `json:"file_type"`
	Filename  string `json:"filename"`
	ByteSize  int64  `json:"byte_size"`
	ExpiresAt int64  `json:"expires_at"`
}

func mustUpload(t *testing.T, e *env, channel string, f form) uploadJSON {
	t.Helper()
	r := e.upload(t, channel, f)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var u uploadJSON
	require.NoError(t, json.Unmarshal(r.body, &u))
	return u
}

func errCode(t *testing.T, body []byte) string {
	t.Helper()
	var b struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &b), string(body))
	return b.Error.Code
}
