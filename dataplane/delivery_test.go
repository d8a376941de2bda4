package dataplane

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// Dial takes the base URL: it fetches the Card from /connector-card.json,
// names its connector_card_id in the hello and dials /ws (H1, W3, W4).
func TestDial_H1_W4_FetchesTheCardFromTheBaseURL(t *testing.T) {
	_, url := startServer(t, nil)
	c, _, _ := dialClient(t, url, nil)
	require.True(t, c.Connected())
	require.Equal(t, testCardID, c.Card().ConnectorCardID)

	// A CardID set by the caller is an expectation the Card must meet.
	_, err := Dial(ctxWait(t), ClientConfig{URL: httpBase(url), Target: newRecTarget(), Advanced: ClientAdvanced{CardID: "im.pinned"}})
	require.ErrorIs(t, err, &imv2.Error{Code: protocol.CodeConnectorCardIDMismatch})
	require.Contains(t, err.Error(), "im.pinned")
}

// No Card, a Card that is not JSON, an invalid Card or an oversized one
// fail Dial with a reason, before any data-plane connection (H1, H2).
func TestDial_H1_H2_BadCardFailsDial(t *testing.T) {
	invalid := testCard()
	invalid.Supports.Profiles = nil
	for name, serve := range map[string]http.HandlerFunc{
		"missing":  http.NotFound,
		"not-json": func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) },
		"invalid":  withCard(invalid, http.NotFoundHandler()).ServeHTTP,
		"oversize": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"x":"` + strings.Repeat("a", maxCardBytes) + `"}`))
		},
	} {
		t.Run(name, func(t *testing.T) {
			var dialled atomic.Int32
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/ws" {
					dialled.Add(1)
					http.Error(w, "no", http.StatusTeapot)
					return
				}
				serve(w, r)
			}))
			defer hs.Close()
			_, err := Dial(ctxWait(t), ClientConfig{URL: hs.URL, Target: newRecTarget()})
			require.Error(t, err)
			require.Contains(t, err.Error(), "Card")
			require.Zero(t, dialled.Load(), "the data plane is not dialled without a Card")
		})
	}
}

// Send's and Final's handles report the terminal outcome: accepted, then
// duplicate for the same message again; the client-wide callback is told
// the same (S1, A3, A6).
func TestDelivery_S1_A3_WaitReportsAcceptedAndDuplicate(t *testing.T) {
	_, url := startServer(t, nil)
	// Told after the handle resolved: Wait may return before the
	// callback ran, so the test receives what it was told.
	told := make(chan imv2.AckStatus, 3)
	c, _, _ := dialClient(t, url, func(cfg *ClientConfig) {
		cfg.Options.OnDelivered = func(_ string, _ imv2.ChatMessage, st imv2.AckStatus) { told <- st }
	})
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)

	d, err := c.Send(ctxWait(t), ch, imv2.ChatMessage{Text: "one"})
	require.NoError(t, err)
	require.NotEmpty(t, d.MessageID())
	st, err := d.Wait(ctxWait(t))
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, st)
	require.Equal(t, ch, d.ChannelID())

	again, err := c.Send(ctxWait(t), ch, imv2.ChatMessage{MessageID: d.MessageID(), Text: "one"})
	require.NoError(t, err)
	st, err = again.Wait(ctxWait(t))
	require.NoError(t, err)
	require.Equal(t, imv2.AckDuplicate, st)

	rep, err := c.NewReply(ch, "")
	require.NoError(t, err)
	require.NoError(t, rep.Delta(ctxWait(t), "stre"))
	fd, err := rep.Final(ctxWait(t), imv2.ChatMessage{Text: "streamed"})
	require.NoError(t, err)
	require.Equal(t, rep.MessageID(), fd.MessageID())
	st, err = fd.Wait(ctxWait(t))
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, st)

	for _, want := range []imv2.AckStatus{imv2.AckAccepted, imv2.AckDuplicate, imv2.AckAccepted} {
		select {
		case got := <-told:
			require.Equal(t, want, got)
		case <-ctxWait(t).Done():
			t.Fatalf("OnDelivered not told %s", want)
		}
	}
	c.deliveries.mu.Lock()
	defer c.deliveries.mu.Unlock()
	require.Empty(t, c.deliveries.open, "resolved handles are forgotten")
}

// The handle is resolved before the client-wide callback runs, so a
// callback may Wait on its own message (Delivery.Wait's doc).
func TestDelivery_S1_CallbackMayWaitOnItsOwnMessage(t *testing.T) {
	_, url := startServer(t, nil)
	handles := make(chan *Delivery, 1)
	waited := make(chan error, 1)
	c, _, _ := dialClient(t, url, func(cfg *ClientConfig) {
		cfg.Options.OnDelivered = func(_ string, m imv2.ChatMessage, _ imv2.AckStatus) {
			d := <-handles
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a deadlock guard
			defer cancel()
			_, err := d.Wait(ctx)
			waited <- err
		}
	})
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	d, err := c.Send(ctxWait(t), ch, imv2.ChatMessage{Text: "one"})
	require.NoError(t, err)
	handles <- d
	require.NoError(t, recv(t, waited), "the callback's Wait saw the outcome")
}

// A rejection with retryable=false is the outcome, as an *imv2.Error; the
// client-wide OnFailed is told too (S3, A8).
func TestDelivery_S3_A8_WaitReportsTheRejection(t *testing.T) {
	_, url := startServer(t, func(cfg *ServerConfig) {
		cfg.NewTarget = func(string) imv2.Target {
			return imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error {
				return imv2.Refused(errors.New("the platform refuses this"))
			})
		}
	})
	failed := make(chan *imv2.Error, 1)
	c, _, _ := dialClient(t, url, func(cfg *ClientConfig) {
		cfg.Options.OnFailed = func(_ string, _ imv2.ChatMessage, err *imv2.Error) { failed <- err }
	})
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	d, err := c.Send(ctxWait(t), ch, imv2.ChatMessage{Text: "no"})
	require.NoError(t, err)
	st, err := d.Wait(ctxWait(t))
	require.Equal(t, imv2.AckRejected, st)
	var e *imv2.Error
	require.ErrorAs(t, err, &e)
	require.False(t, e.Retryable)
	require.NotEmpty(t, e.Code)
	require.Equal(t, e, recv(t, failed))
}

// Without an outcome, Wait ends with its context, and with ErrClosed when
// the Client closes; a send that fails leaves no handle behind.
func TestDelivery_S2_WaitEndsWithContextOrClose(t *testing.T) {
	release := make(chan struct{})
	_, url := startServer(t, func(cfg *ServerConfig) {
		cfg.NewTarget = func(string) imv2.Target {
			return imv2.TargetFunc(func(ctx context.Context, _ string, _ *imv2.ChatMessage) error {
				select { // the platform hangs: no ack comes
				case <-release:
				case <-ctx.Done():
				}
				return imv2.NotPosted(errors.New("gone"))
			})
		}
	})
	defer close(release)
	c, _, _ := dialClient(t, url, nil)
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)

	_, err = c.Send(ctxWait(t), "cch_unknown", imv2.ChatMessage{Text: "x"})
	require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeChannelNotOpen})
	_, err = c.Send(ctxWait(t), ch, imv2.ChatMessage{}) // invalid: no text, no files
	require.Error(t, err)
	require.Empty(t, c.deliveries.open)

	d, err := c.Send(ctxWait(t), ch, imv2.ChatMessage{Text: "hangs"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = d.Wait(ctx)
	require.ErrorIs(t, err, context.Canceled)

	require.NoError(t, c.Close())
	st, err := d.Wait(context.Background())
	require.ErrorIs(t, err, imv2.ErrClosed)
	require.Empty(t, st)
	_, err = c.Send(ctxWait(t), ch, imv2.ChatMessage{Text: "after close"})
	require.Error(t, err)
}

// Two Sends of one message_id at once share one handle. When one of them
// fails, the handle must stay for the other (its final is pending, or may
// be): its Wait ends with the outcome, not only at Close. The sends are
// ordered by channels, so every interleaving in the table is exact.
func TestDelivery_S1_ConcurrentSendOfOneMessageIDWhereOneFails(t *testing.T) {
	boom := errors.New("queue full")
	for _, tc := range []struct {
		name         string
		firstFails   bool // the send that created the handle
		secondFails  bool
		firstEndsFst bool // the first send returns before the second
	}{
		{"first fails after the second is pending", true, false, false},
		{"first fails before the second returns", true, false, true},
		{"second fails while the first is pending", false, true, true},
		{"second fails before the first returns", false, true, false},
		{"both fail", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Client
			outcome := func(fails bool) error {
				if fails {
					return boom
				}
				return nil
			}
			type result struct {
				d   *Delivery
				err error
			}
			firstIn, firstGo := make(chan struct{}), make(chan struct{})
			firstRes := make(chan result, 1)
			go func() {
				d, err := c.track("c1", "m1", func() error {
					close(firstIn) // registered: the handle exists
					<-firstGo
					return outcome(tc.firstFails)
				})
				firstRes <- result{d, err}
			}()
			<-firstIn
			var second result
			secondIn, secondGo := make(chan struct{}), make(chan struct{})
			secondRes := make(chan result, 1)
			go func() {
				d, err := c.track("c1", "m1", func() error {
					close(secondIn)
					<-secondGo
					return outcome(tc.secondFails)
				})
				secondRes <- result{d, err}
			}()
			<-secondIn
			var first result
			if tc.firstEndsFst {
				close(firstGo)
				first = <-firstRes
				close(secondGo)
				second = <-secondRes
			} else {
				close(secondGo)
				second = <-secondRes
				close(firstGo)
				first = <-firstRes
			}
			require.Equal(t, tc.firstFails, first.err != nil)
			require.Equal(t, tc.secondFails, second.err != nil)
			var held []*Delivery
			for _, r := range []result{first, second} {
				if r.err == nil {
					held = append(held, r.d)
				}
			}
			if len(held) == 2 {
				require.Same(t, held[0], held[1], "sends of one final share its handle")
			}

			c.deliveries.resolve("c1", "m1", imv2.AckAccepted, nil)
			for _, d := range held {
				select {
				case <-d.Done():
				default:
					t.Fatal("the outcome came but the holder's Wait would block: the failed send took the handle away")
				}
				st, err := d.Wait(context.Background())
				require.NoError(t, err)
				require.Equal(t, imv2.AckAccepted, st)
			}
			c.deliveries.mu.Lock()
			defer c.deliveries.mu.Unlock()
			require.Empty(t, c.deliveries.open, "nothing stays registered")
		})
	}
}
