package pgstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/pgstore"
)

// The failover test runs each Connector replica as a child process of the
// test binary, so that it can be killed with SIGKILL: TestMain turns the
// child into replicaMain when these variables are set.
const (
	envReplica  = "IMV2_FAILOVER_REPLICA"  // the replica's name
	envDB       = "IMV2_FAILOVER_DB"       // the database URL
	envPlatform = "IMV2_FAILOVER_PLATFORM" // the IM platform's base URL
)

// Timings of a replica: short, so the failover test's figures are those
// of a tuned deployment and its wall time stays small.
const (
	replicaAckTimeout    = 500 * time.Millisecond
	replicaTargetTimeout = time.Second // the claim lease is three times this
	replicaPendingCap    = 128
)

// postBody is what a replica's Target sends the platform for a final, a
// draft or a failed user message.
type postBody struct {
	Replica   string `json:"replica"`
	Channel   string `json:"channel"`
	MessageID string `json:"message_id"`
	Key       string `json:"key,omitempty"`
	Text      string `json:"text,omitempty"`
	Code      string `json:"code,omitempty"`
}

// userBody is a user message the test hands a replica, as an IM platform
// hands its Connector a message a user typed.
type userBody struct {
	Channel   string `json:"channel"`
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
}

// httpTarget is a replica's Target: every side effect is a request to the
// platform, which lives in the test process and deduplicates finals by
// their idempotency key.
type httpTarget struct {
	name, base string
	client     *http.Client
}

func (h *httpTarget) call(ctx context.Context, path string, b postBody) error {
	body, _ := json.Marshal(b)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("platform answered %s", resp.Status)
	}
	return nil
}

func (h *httpTarget) PostMessage(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	key, _ := imv2.IdempotencyKey(ctx)
	return h.call(ctx, "/post", postBody{Replica: h.name, Channel: channelID, MessageID: m.MessageID, Key: key, Text: m.Text})
}

func (h *httpTarget) UpdateDraft(ctx context.Context, channelID, messageID, text string) error {
	return h.call(ctx, "/draft", postBody{Replica: h.name, Channel: channelID, MessageID: messageID, Text: text})
}

// PostsIdempotently: the platform deduplicates by key, so an orphaned
// final is posted again after its lease (S8).
func (h *httpTarget) PostsIdempotently() bool { return true }

// replicaMain is one Connector replica: a dataplane.Server on pgstore with
// a Relay, serving the Card, /ws and /user on a free loopback port, which
// it prints as "ready <addr>". It runs until killed (SIGTERM closes it).
func replicaMain() int {
	name, url, platform := os.Getenv(envReplica), os.Getenv(envDB), os.Getenv(envPlatform)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	st, err := pgstore.Open(ctx, url, pgstore.Options{PendingCap: replicaPendingCap})
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 1
	}
	defer st.Close()
	target := &httpTarget{name: name, base: platform, client: &http.Client{Timeout: 5 * time.Second}}
	relay := pgstore.NewRelay(st)
	opts := imv2.Options{
		Pending: st.Pending(), Completed: st.Completed(),
		AckTimeout: replicaAckTimeout, RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
		TargetTimeout: replicaTargetTimeout,
		OnFailed: func(ch string, m imv2.ChatMessage, e *imv2.Error) {
			_ = target.call(context.Background(), "/failed", postBody{Replica: name, Channel: ch, MessageID: m.MessageID, Code: string(e.Code)})
		},
	}
	srv, err := dataplane.NewServer(dataplane.ServerConfig{
		Card:          consolebridge.Card(),
		NewTarget:     func(string) imv2.Target { return target },
		Options:       &opts,
		Registry:      st,
		OnChannelOpen: relay.ChannelOpened,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 1
	}
	relay.Serve(srv)
	go func() { _ = relay.Run(ctx) }()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /connector-card.json", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(consolebridge.Card())
	})
	mux.Handle("/ws", srv)
	mux.HandleFunc("POST /user", func(w http.ResponseWriter, r *http.Request) {
		var u userBody
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, err := relay.Send(r.Context(), u.Channel, imv2.ChatMessage{MessageID: u.MessageID, Text: u.Text})
		var e *imv2.Error
		switch {
		case err == nil:
		case errors.As(err, &e):
			http.Error(w, string(e.Code), http.StatusServiceUnavailable)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 1
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	fmt.Printf("ready %s\n", ln.Addr())
	<-ctx.Done()
	_ = hs.Close()
	_ = srv.Close()
	return 0
}
