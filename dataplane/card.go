package dataplane

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// maxCardBytes bounds the Card document Dial reads.
const maxCardBytes = 1 << 20

// FetchCard reads the Connector Card at base + "/connector-card.json" and
// admits it (protocol.Card.Admit, H1, H2); base is the Connector's base URL,
// http:// or https://, maybe with a path prefix. client nil uses
// http.DefaultClient; ctx bounds the request.
func FetchCard(ctx context.Context, client *http.Client, base string) (*protocol.Card, error) {
	u, err := baseURL(base)
	if err != nil {
		return nil, err
	}
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.JoinPath("connector-card.json").String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, imv2.NotPosted(fmt.Errorf("dataplane: fetch the Card: %w", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("dataplane: fetch the Card from %s: HTTP %s", req.URL, resp.Status)
		if retryStatus(resp.StatusCode) {
			return nil, imv2.NotPosted(err)
		}
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCardBytes+1))
	if err != nil {
		return nil, fmt.Errorf("dataplane: fetch the Card: %w", err)
	}
	if len(body) > maxCardBytes {
		return nil, fmt.Errorf("dataplane: the Card at %s is over %d bytes", req.URL, maxCardBytes)
	}
	card, err := decodeCard(body)
	if err != nil {
		return nil, fmt.Errorf("dataplane: the Card at %s: %w", req.URL, err)
	}
	return card, nil
}

// retryStatus reports whether an HTTP status is a refusal for now: 408,
// 429 or 5xx.
func retryStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// decodeCard decodes a Card document and admits it as xAgent does
// (protocol.Card.Admit: Common Protocol §4.1's hard validation, H2, P1):
// what Common Protocol §4.1 calls guidance does not refuse a Connector.
func decodeCard(body []byte) (*protocol.Card, error) {
	card := new(protocol.Card)
	if err := (&imv2.Packet{Payload: body}).DecodePayload(card); err != nil {
		return nil, err
	}
	if err := card.Admit(); err != nil {
		return nil, err
	}
	return card, nil
}

// baseURL parses a Connector base URL: http or https, without the /ws
// of the data plane (a caller still passing it is told so, not guessed).
func baseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: bad Connector URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: Connector URL scheme %q is not http or https (the base URL, not the ws:// data plane)", u.Scheme)
	}
	if u.Host == "" {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: Connector URL %q has no host", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if strings.HasSuffix(u.Path, "/ws") {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: Connector URL %q ends in /ws: give the base URL, Dial finds the Card and /ws under it", raw)
	}
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// dataPlaneURL is the ws:// or wss:// /ws endpoint under base.
func dataPlaneURL(base *url.URL) string {
	u := *base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	return u.JoinPath("ws").String()
}
