package imv2test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/kithook"
)

// RunConnector runs the Connector-side checks against a Connector built
// with this SDK, in process, one subtest per check: a failed check fails
// its subtest with the reason; a skipped one is a skipped subtest
// saying why.
//
// start builds and starts the Connector with target — the suite's
// RecordingTarget, the observer — as its IM platform, registers its own
// shutdown with t.Cleanup, and returns it (URL, APIKey, User …; Observer
// and Buffered are filled in from target). streaming says whether target
// can show temporary text; run once with each to cover D8 and K5.
// cfg may be nil. Under go test -v, a cfg without a Log logs the
// transcript (every step, every ack with its code) to t. The report is
// returned for further assertions.
func RunConnector(t *testing.T, streaming bool, start func(t *testing.T, target *RecordingTarget) Connector, cfg *Config) *Report {
	t.Helper()
	target := NewRecordingTarget(streaming)
	c := start(t, target)
	c.Observer = target
	c.Buffered = !streaming
	return runChecks(t, c, cfg)
}

// RunKit runs the Connector-side checks against k, a Connector built
// with connector.New, in process, one subtest per check; cfg may be nil.
// The checks run first (CheckKit) and then report as subtests, so go test
// -run picks which results show, not which checks run: Config.Run picks
// those. It needs nothing else: it watches every platform call the kit
// makes that succeeds (Post, Finish, PostDraft, Edit, Draft, Typing) and
// types as a user through k.Receive, and it reads the API key, the mode
// and the bounds from k. The platform records nothing for the suite.
//
//	func TestConformance(t *testing.T) {
//		k, err := connector.New(card, &myChat{}, nil)
//		if err != nil {
//			t.Fatal(err)
//		}
//		imv2test.RunKit(t, k, nil)
//	}
//
// Two checks observe a bound expiring: K6.c the delta idle TTL (plus the
// sweep that finds it) and K12.d the activity timeout. Their defaults
// (5 min + 30 s, 30 s) are too long for a test, so those checks are
// skipped, saying so and how to shorten them, unless k was built with
// bounds of at most 10 s, as in the Example.
//
// A run waits on the wall clock (about 15 s). Run in a testing/synctest
// bubble with CheckKit, it takes about a second: see CheckKit.
func RunKit(t *testing.T, k *connector.Connector, cfg *Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := CheckKit(ctx, k, withTestLog(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	ReportTo(t, rep)
	return rep
}

// CheckKit runs the Connector-side checks against k, a Connector built
// with connector.New, in process, and returns the report; RunKit is
// CheckKit plus a subtest per check. k is served on an in-memory network
// (no port) for the run and closed at its end.
//
// Every wait of the suite and every timer of the kit reads package time,
// so inside a testing/synctest bubble a run costs no wall time: the
// bubble's clock moves only once the suite and the kit are both idle,
// which makes each "nothing more happens" window exact rather than a
// guess. Build k inside the bubble and report outside it (a bubble
// cannot start subtests):
//
//	var rep *imv2test.Report
//	synctest.Test(t, func(t *testing.T) {
//		k, err := connector.New(card, &myChat{}, nil)
//		if err != nil {
//			t.Fatal(err)
//		}
//		if rep, err = imv2test.CheckKit(t.Context(), k, nil); err != nil {
//			t.Fatal(err)
//		}
//	})
//	imv2test.ReportTo(t, rep)
func CheckKit(ctx context.Context, k *connector.Connector, cfg *Config) (*Report, error) {
	built, ok := kithook.Describe(k)
	if !ok || !kithook.Watch(k, nil) {
		return nil, errors.New("imv2test: CheckKit needs a Connector built with connector.New")
	}
	obs := &kitObserver{handles: map[[2]string]string{}}
	kithook.Watch(k, obs.saw)
	defer kithook.Watch(k, nil)
	ln := newPipeNet()
	served := make(chan error, 1)
	go func() { served <- k.Serve(context.Background(), ln) }()
	defer func() {
		k.Close()
		<-served
	}()
	c := Connector{URL: ln.url(), APIKey: built.APIKey, Observer: obs, User: kitUser{k: k},
		Buffered: k.Mode() == connector.ModeBuffer, why: map[string]string{}, noTyping: !built.Typing, dial: ln.dial}
	if built.Listener {
		// A user types into the platform; only its Listener hands that over.
		if ty, ok := built.Platform.(Typist); ok {
			c.User = kitUser{k: k, typist: ty}
		} else {
			c.User = nil
			c.why[NeedUser] = fmt.Sprintf("the platform %T reads its conversations itself (a connector.Listener) and is no imv2test.Typist: "+
				"typing through Connector.Receive would pass by the Listener; implement Type on the test platform to run these checks", built.Platform)
		}
	}
	// A stream idle for the TTL goes at the next sweep: up to TTL+sweep.
	ttl, sweep := cmp.Or(built.DeltaIdleTTL, kitDefaultTTL), cmp.Or(built.DeltaSweep, kitDefaultSweep)
	if ttl+sweep <= maxKitBound {
		c.DeltaIdleTTL, c.DeltaSweep = ttl, sweep
	} else {
		c.why[NeedDeltaTTL] = tooLong(fmt.Sprintf("an idle delta stream expires after up to %s (DeltaIdleTTL %s + DeltaSweep %s)",
			ttl+sweep, bound(built.DeltaIdleTTL, ttl), bound(built.DeltaSweep, sweep)))
	}
	if at := cmp.Or(built.ActivityTimeout, kitDefaultActivity); at <= maxKitBound {
		c.ActivityTimeout = at
	} else {
		c.why[NeedActTTL] = tooLong(fmt.Sprintf("a shown status clears after ActivityTimeout %s", bound(built.ActivityTimeout, at)))
	}
	return CheckConnector(ctx, c, cfg)
}

// maxKitBound is the longest bound RunKit waits out; the kit's defaults
// (imv2.Options) are longer.
const (
	maxKitBound        = 10 * time.Second
	kitDefaultTTL      = 5 * time.Minute
	kitDefaultSweep    = 30 * time.Second
	kitDefaultActivity = 30 * time.Second
)

// bound shows a bound, saying when it is the default.
func bound(set, d time.Duration) string {
	if set <= 0 {
		return d.String() + " (the default)"
	}
	return d.String()
}

// tooLong is the reason a check of a bound is skipped, with the one line
// that makes it observable.
func tooLong(what string) string {
	return fmt.Sprintf("not observable here: %s, longer than the %s RunKit waits; build the Connector under test with "+
		"Options.Advanced.Channel = &imv2.Options{DeltaIdleTTL: time.Second, DeltaSweep: 100 * time.Millisecond, "+
		"ActivityTimeout: time.Second} to run it", what, maxKitBound)
}

// kitObserver turns the platform calls a kit reports into the Events an
// Observer gives the checks.
type kitObserver struct {
	Recorder
	mu      sync.Mutex
	handles map[[2]string]string // message_id by channel and handle, for edits
}

func (o *kitObserver) saw(c kithook.Call) {
	e := Event{Event: c.Op, MessageID: c.MessageID, Text: &c.Text}
	switch c.Op {
	case "post", "draft":
		o.mu.Lock()
		o.handles[[2]string{c.ChannelID, c.Handle}] = c.MessageID
		o.mu.Unlock()
	case "edit":
		o.mu.Lock()
		e.MessageID = o.handles[[2]string{c.ChannelID, c.Handle}]
		o.mu.Unlock()
	case "final":
		for _, f := range c.Files {
			e.Files = append(e.Files, EventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
		}
	case "typing":
		e.Text, e.Status, e.ToolName = nil, string(c.Activity.Status), c.Activity.ToolName
		if c.Activity.Status == imv2.ActivityIdle {
			e = Event{Event: "typing_clear"}
		}
	}
	o.Record(e)
}

// runChecks runs the Connector-side checks against c, one subtest per
// check; under go test -v a cfg without a Log logs the transcript to t.
func runChecks(t *testing.T, c Connector, cfg *Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := CheckConnector(ctx, c, withTestLog(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	ReportTo(t, rep)
	return rep
}

// withTestLog returns cfg with t as its Log under go test -v when cfg
// has none.
func withTestLog(t *testing.T, cfg *Config) *Config {
	if !testing.Verbose() || (cfg != nil && cfg.Log != nil) {
		return cfg
	}
	var o Config
	if cfg != nil {
		o = *cfg
	}
	o.Log = testLog{t}
	return &o
}

// Typist is a test platform a person can type into. When the platform
// of a kit Connector is a connector.Listener, RunKit and CheckKit type the
// suite's user messages into the conversation with Type, and they reach
// xAgent only through the platform's Listener, as in production: a
// Listener that hands over too much (a new binding's history) or too
// little fails the checks. A Listener that is no Typist has the checks
// that need a user skipped, saying so: typing through Connector.Receive
// would pass by the Listener. Other platforms are typed to through
// Connector.Receive, as a webhook hands events over.
type Typist interface {
	// Type adds a person's message to the conversation's history, as the
	// platform's own app would: text, or one file when file is not nil.
	Type(ctx context.Context, conversation, text string, file *UserFile) error
}

// UserFile is a file a user sends.
type UserFile struct {
	Name string
	Data []byte
}

// kitUser is a person typing in the conversation a kit channel is bound
// to: each user message is typed into the platform (typist), or else a
// platform event handed to Receive.
type kitUser struct {
	k      *connector.Connector
	typist Typist
}

func (u kitUser) key(ctx context.Context, channelID string) (string, error) {
	b, found, err := u.k.Binding(ctx, channelID)
	switch {
	case err != nil:
		return "", err
	case !found:
		return "", fmt.Errorf("imv2test: channel %s is bound to no conversation", channelID)
	}
	return b.Key, nil
}

// Say sends text as a user message of channelID's conversation.
func (u kitUser) Say(ctx context.Context, channelID, text string) error {
	key, err := u.key(ctx, channelID)
	if err != nil {
		return err
	}
	if u.typist != nil {
		return u.typist.Type(ctx, key, text, nil)
	}
	return u.k.Receive(ctx, connector.InboundEvent{Conversation: key, EventID: imv2.NewMessageID(), Text: text})
}

// SendFile sends data as a file-only user message of channelID's
// conversation.
func (u kitUser) SendFile(ctx context.Context, channelID, filename string, data []byte) error {
	key, err := u.key(ctx, channelID)
	if err != nil {
		return err
	}
	if u.typist != nil {
		return u.typist.Type(ctx, key, "", &UserFile{Name: filename, Data: data})
	}
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return u.k.Receive(ctx, connector.InboundEvent{Conversation: key, EventID: imv2.NewMessageID(),
		Files: []connector.InboundFile{{Filename: filename, Open: open}}})
}

// testLog writes a transcript to t.Log, one call per line written.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// ReportTo turns a report into subtests of t: a failed check fails its
// subtest with the reason, a skipped one is reported skipped (SKIP under
// go test -v) with why: a skipped check is no pass.
func ReportTo(t *testing.T, rep *Report) {
	t.Helper()
	for _, res := range rep.Results {
		t.Run(res.Check, func(t *testing.T) {
			switch res.Status {
			case Fail:
				t.Errorf("%s [%s]: %s", res.Title, strings.Join(res.Rules, " "), res.Reason)
			case Skip:
				t.Skip(res.Reason)
			}
		})
	}
}

// SDKUser is the User of a Connector built on this SDK: it sends user
// messages on the data-plane Server's Channel and offers files through
// the connector Handler (a signed download_url), as a platform adapter
// does when a person types.
type SDKUser struct {
	Server *dataplane.Server
	Files  *connector.Handler
}

// Say sends text as a user message on channelID.
func (u SDKUser) Say(ctx context.Context, channelID, text string) error {
	ch := u.Server.Channel(channelID)
	if ch == nil {
		return fmt.Errorf("imv2test: channel %s is not known to the Server", channelID)
	}
	_, err := ch.Send(ctx, imv2.ChatMessage{Text: text})
	return err
}

// SendFile offers data as a file and sends a file-only user message.
func (u SDKUser) SendFile(ctx context.Context, channelID, filename string, data []byte) error {
	ch := u.Server.Channel(channelID)
	if ch == nil {
		return fmt.Errorf("imv2test: channel %s is not known to the Server", channelID)
	}
	f, err := u.Files.OfferFile(ctx, channelID, filename, "", bytes.NewReader(data))
	if err != nil {
		return err
	}
	_, err = ch.Send(ctx, imv2.ChatMessage{Files: []imv2.File{f}})
	return err
}
