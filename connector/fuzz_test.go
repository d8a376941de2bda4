package connector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/xagentkit/imv2/connector"
)

// FuzzUpload posts arbitrary multipart bodies (with a fuzzed boundary and
// channel header) to POST /files/uploads. The handler never panics and
// never answers 5xx for bad input; a 200 stores exactly one file whose
// file_ref is in the ref alphabet, and any refusal stores nothing (T1).
func FuzzUpload(f *testing.F) {
	seed := func(body string) { f.Add("b0undary", "cch_1", []byte(strings.ReplaceAll(body, "\n", "\r\n"))) }
	seed("--b0undary\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\nContent-Type: text/plain\n\nhello\n--b0undary--\n")
	seed("--b0undary\nContent-Disposition: form-data; name=\"recipient_ref\"\n\nr1\n--b0undary\nContent-Disposition: form-data; name=\"file\"; filename=\"../../etc/passwd\"\n\nx\n--b0undary--\n")
	seed("--b0undary\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\n\n1\n--b0undary\nContent-Disposition: form-data; name=\"file\"; filename=\"b\"\n\n2\n--b0undary--\n")
	seed("--b0undary\nContent-Disposition: form-data; name=\"junk\"\n\n" + strings.Repeat("j", 300) + "\n--b0undary--\n")
	seed("--b0undary\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''%E2%82%AC.png\nContent-Type: image/png\n\n\x89PNG\n--b0undary--\n")
	seed("not multipart at all")
	f.Add("", "", []byte{})
	f.Add("x", "../cch", []byte("--x--"))
	f.Fuzz(func(t *testing.T, boundary, channel string, body []byte) {
		const maxUpload = 1 << 10
		store := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{MaxFileBytes: maxUpload})
		h, err := connector.NewHandler(connector.HandlerConfig{Card: testCard(), APIKey: testKey, Files: store, MaxUploadBytes: maxUpload})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/files/uploads", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
		req.Header.Set(connector.HeaderChannelID, channel)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		files, _ := store.Len()
		switch rec.Code {
		case http.StatusOK:
			var u struct {
				FileRef string `json:"file_ref"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &u); err != nil || files != 1 {
				t.Fatalf("200 with body %q and %d files stored", rec.Body, files)
			}
			for _, r := range u.FileRef {
				if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
					t.Fatalf("file_ref %q outside the ref alphabet", u.FileRef)
				}
			}
			if _, _, err := h.OpenFile(context.Background(), channel, u.FileRef); err != nil {
				t.Fatalf("stored file %q does not open for its channel: %v", u.FileRef, err)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if files != 0 {
				t.Fatalf("refused with %d but %d files stored", rec.Code, files)
			}
		default:
			t.Fatalf("status %d for client input: %s", rec.Code, rec.Body)
		}
	})
}

// FuzzFileRefRequest sends GET /files/refs/{path}?{query} with any path
// and query to a Connector holding one file. Only the exact signed URL of
// that file (its ref, channel, expiry and signature) may answer 200; dot
// segments, encodings and tampering get 403 or 404, never a file and
// never a 5xx (T2, T3).
func FuzzFileRefRequest(f *testing.F) {
	store := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{})
	h, err := connector.NewHandler(connector.HandlerConfig{Card: testCard(), APIKey: testKey, Files: store})
	if err != nil {
		f.Fatal(err)
	}
	file, err := h.OfferFile(context.Background(), "cch_a", "a.txt", "text/plain", strings.NewReader("secret bytes"))
	if err != nil {
		f.Fatal(err)
	}
	signed, err := url.Parse(file.DownloadURL)
	if err != nil {
		f.Fatal(err)
	}
	path := strings.TrimPrefix(signed.EscapedPath(), "/files/refs/")
	other := signed.Query()
	other.Set("ch", "cch_b")
	f.Add(path, signed.RawQuery)
	f.Add(path, other.Encode())
	f.Add(path+"/..", signed.RawQuery)
	f.Add("..%2f"+path, signed.RawQuery)
	f.Add("%2e%2e/%2e%2e/etc/passwd", signed.RawQuery)
	f.Add(strings.ToUpper(path), signed.RawQuery)
	f.Add(path, strings.Replace(signed.RawQuery, "exp=", "exp=9", 1))
	f.Add(path, "")
	f.Fuzz(func(t *testing.T, p, query string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL = &url.URL{Path: "/files/refs/" + p, RawQuery: query}
		if u, err := url.PathUnescape(p); err == nil {
			req.URL = &url.URL{Path: "/files/refs/" + u, RawPath: "/files/refs/" + p, RawQuery: query}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			q, _ := url.ParseQuery(query)
			if req.URL.EscapedPath() != signed.EscapedPath() || q.Get("ch") != "cch_a" || q.Get("sig") != signed.Query().Get("sig") {
				t.Fatalf("served the file for path %q query %q", p, query)
			}
			if rec.Body.String() != "secret bytes" {
				t.Fatalf("served %q", rec.Body)
			}
		case http.StatusForbidden, http.StatusNotFound:
			if strings.Contains(rec.Body.String(), "secret bytes") {
				t.Fatal("file bytes in an error body")
			}
		default:
			t.Fatalf("status %d for path %q query %q", rec.Code, p, query)
		}
	})
}
