package imv2test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestListeningURL_PlainAndJSON: the lines StartProcess takes the URL
// from, and look-alikes it must pass over.
func TestListeningURL_PlainAndJSON(t *testing.T) {
	const u = "http://127.0.0.1:8787"
	for _, c := range []struct {
		line, url string
	}{
		{"listening on " + u, u},
		{"  listening on " + u + "\r", u},
		{`{"time":"2026-12-04T21:00:00Z","level":"INFO","msg":"listening on ` + u + `","url":"` + u + `"}`, u},
		{`{"level":"INFO","msg":"listening on","url":"` + u + `"}`, u},
		// Not the announcement: other records with a url, a msg without
		// one, a record whose msg names another URL, a plain log line.
		{`{"level":"INFO","msg":"monitoring on ` + u + `","url":"` + u + `"}`, ""},
		{`{"level":"INFO","msg":"listening on ` + u + `"}`, ""},
		{`{"level":"INFO","msg":"listening on http://other:1","url":"` + u + `"}`, ""},
		{`{"level":"INFO","msg":"listening on","url":""}`, ""},
		{`{"msg":"listening on",`, ""},
		{`time=2026-12-04T21:00:00Z level=INFO msg="listening on ` + u + `" url=` + u, ""},
		{"console: starting", ""},
	} {
		got, ok := listeningURL(c.line)
		require.Equal(t, c.url != "", ok, "%q", c.line)
		require.Equal(t, c.url, got, "%q", c.line)
	}
}
