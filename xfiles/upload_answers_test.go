package xfiles_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/xfiles"
)

// TestUpload_T1_AnswerVectors reads testdata/upload-answers: each vector
// is a Connector's answer to an upload and the files[] entry it must give
// (or refused). Common Protocol §5.1 requires file_ref only; before the
// missing members were filled from the request, fileref-only.json was
// refused ("lacks file_ref or a valid file_type").
func TestUpload_T1_AnswerVectors(t *testing.T) {
	paths, err := filepath.Glob("testdata/upload-answers/*.json")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(paths), 5)
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			raw, err := os.ReadFile(p)
			require.NoError(t, err)
			var v struct {
				Filename string          `json:"filename"`
				Body     string          `json:"body"`
				Answer   json.RawMessage `json:"answer"`
				Want     *imv2.File      `json:"want"`
				Refused  bool            `json:"refused"`
			}
			require.NoError(t, json.Unmarshal(raw, &v))
			require.True(t, v.Refused != (v.Want != nil), "a vector wants a file or a refusal")
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// A Connector answers once it stored the whole file.
				if _, _, err := r.FormFile("file"); err != nil {
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(v.Answer)
			}))
			t.Cleanup(srv.Close)
			res, err := xfiles.Upload(context.Background(), srv.Client(), srv.URL, "", "cch_1", v.Filename, strings.NewReader(v.Body))
			if v.Refused {
				require.Error(t, err)
				require.False(t, imv2.SafeToRetry(err), "a malformed answer is permanent")
				return
			}
			require.NoError(t, err)
			require.Equal(t, *v.Want, res.File())
		})
	}
}

// TestUpload_T1_ChannelNotOpenIsRetryable: the Connector answers 409
// channel_not_open while the channel is not (yet) reopened on a
// connection, as during an xAgent reconnect; that is a refusal for now,
// not a permanent one (it was permanent, and the file was lost). Any other
// 409 stays permanent.
func TestUpload_T1_ChannelNotOpenIsRetryable(t *testing.T) {
	var code atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":{"code":"` + code.Load().(string) + `","message":"no"}}`))
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		code      string
		retryable bool
	}{{"channel_not_open", true}, {"something_else", false}} {
		code.Store(c.code)
		_, err := xfiles.Upload(context.Background(), srv.Client(), srv.URL, "", "cch_1", "a.txt", strings.NewReader("x"))
		var he *xfiles.HTTPError
		require.ErrorAs(t, err, &he)
		require.Equal(t, c.code, he.Code)
		require.Equal(t, c.retryable, imv2.SafeToRetry(err), c.code)
	}
}

// TestUpload_T1_FileRefOnlyCountsABodyOfUnknownSize: with only file_ref in
// the answer and a body without a Len, byte_size is the bytes sent.
func TestUpload_T1_FileRefOnlyCountsABodyOfUnknownSize(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, err := r.FormFile("file"); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"file_ref":"file_u"}`))
	}))
	t.Cleanup(srv.Close)
	body := struct{ io.Reader }{strings.NewReader("12345")} // hides the Len
	res, err := xfiles.Upload(context.Background(), srv.Client(), srv.URL, "", "cch_1", "a.mp3", body)
	require.NoError(t, err)
	require.Equal(t, imv2.File{Type: imv2.FileAudio, FileRef: "file_u", Filename: "a.mp3", ByteSize: 5}, res.File())
}
