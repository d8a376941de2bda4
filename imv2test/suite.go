package imv2test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/xagentkit/imv2/protocol"
)

// Connector describes a Connector under test.
type Connector struct {
	// URL is the Connector's base URL (http://host:port, maybe a path
	// prefix); the data plane is URL/ws.
	URL string
	// Handler, set instead of URL, is a Connector in this process: the
	// run serves it on an in-memory network (no port) and stops serving
	// at its end. Every wait of such a run reads package time, so inside
	// a testing/synctest bubble (Handler built there too) the run costs
	// no wall time; see CheckKit.
	Handler http.Handler
	// APIKey, when the Connector was started with one, is sent as a bearer
	// token; checks of the key itself run only then.
	APIKey string
	// Observer sees the target's side effects; nil skips the checks that
	// need one.
	Observer Observer
	// User makes the Connector send user messages; nil skips the checks
	// that need one.
	User User
	// Buffered declares that the target cannot stream: no temporary text
	// may ever appear (K5). False declares a streaming target (D8).
	Buffered bool
	// DeltaIdleTTL and DeltaSweep declare how long an idle delta stream
	// lives and how often the Connector sweeps; with a TTL set, K6.c
	// proves the stream expires. Zero skips it (a 5-minute TTL is not
	// observable in a test run).
	DeltaIdleTTL, DeltaSweep time.Duration
	// ActivityTimeout declares the local timeout of a shown status (C7);
	// with it set, K12.d proves typing clears by itself. Zero skips it.
	ActivityTimeout time.Duration
	// HTTPClient is used for the HTTP endpoints; default a client with a
	// 10 s timeout.
	HTTPClient *http.Client

	// why says, by need, why it is unmet better than missing's default
	// (RunKit knows what the kit was built with).
	why map[string]string
	// noTyping: the target has no typing indicator (RunKit: a platform
	// that is no connector.Typer), so typing cannot be observed.
	noTyping bool
	// dial, when set, opens every data-plane connection (CheckKit's
	// in-memory network); HTTPClient then dials the same way.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Config tunes a run. The zero value runs every check with the default
// tolerances.
type Config struct {
	// Run selects checks whose name matches this regular expression, like
	// go test -run; empty runs all.
	Run string
	// Wait bounds every wait for an expected packet or event (default 5 s).
	// It is only spent when something is missing.
	Wait time.Duration
	// Quiet is how long the suite watches for something that must not
	// happen (default 300 ms): a second ack, a repeated display.
	Quiet time.Duration
	// Lag is how long after an accepted ack the observer may take to
	// report the final the ack vouches for (default 500 ms): the ack may
	// only follow the side effect (M12), but an out-of-process observer
	// stream is read independently of the WebSocket.
	Lag time.Duration
	// Resend bounds the wait for an xAgent's resend of an unacknowledged
	// final (default 15 s; set it above the implementation's ack timeout).
	Resend time.Duration
	// DeltaStreams is how many open delta streams K6.a tries on one
	// channel before it calls delta state unbounded (default 1024).
	DeltaStreams int
	// DeltaBytes is how much text K6.b streams into one message before it
	// calls delta text unbounded (default 2 MiB, in 256 KiB deltas).
	DeltaBytes int
	// RetryAttempts bounds how often the suite, playing xAgent, sends a
	// final again after the Connector rejected it with retryable=true, as
	// xAgent does (A7, A8; default DefaultRetryAttempts). A check fails
	// only when the Connector never accepts: its script sees the terminal
	// answer, or the last retryable rejection once the resends ran out.
	RetryAttempts int
	// RetryMin is the backoff before the first such resend; it doubles
	// with each one (default DefaultRetryMin).
	RetryMin time.Duration
	// RetryMax caps that backoff, as xAgent's does (default no cap: it
	// doubles until RetryBudget ends the resends). A final held behind an
	// earlier one (channel_busy) is resent soon after that one went
	// through only with a cap.
	RetryMax time.Duration
	// RetryBudget bounds the time from a final's first retryable
	// rejection to its last resend (default half of Wait, so the last
	// answer still arrives while an expect waits for it).
	RetryBudget time.Duration
	// HelloVersion is the protocol_version every hello of the suite
	// carries (default protocol.ProtocolVersion, 3.0). Set a newer one, such
	// as "4.3", to drive the Connector as today's xAgent does: its hello
	// announces its own current version, and the Connector must admit it
	// and answer with its own (W4).
	HelloVersion string
	// InMemory, on the xAgent side, serves the suite's Connector on an
	// in-memory network instead of a loopback port: the XAgent reaches it
	// only through XAgentEnv.HTTPClient and Dialer. Every wait of such a
	// run reads package time, so inside a testing/synctest bubble it costs
	// no wall time (the Connector side does the same with
	// Connector.Handler or CheckKit).
	InMemory bool
	// CheckTimeout bounds one check (default 60 s).
	CheckTimeout time.Duration
	// Log, when set, receives a transcript: every step and its outcome,
	// and every chat.message.ack received with its status, code,
	// retryable and the resend it caused. Writes to it are serialized.
	Log io.Writer
}

// lockedWriter serializes the transcript: the steps and the acks seen by
// a connection's reader are written from different goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (c *Config) withDefaults() Config {
	var o Config
	if c != nil {
		o = *c
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setDur(&o.Wait, 5*time.Second)
	setDur(&o.Quiet, 300*time.Millisecond)
	setDur(&o.Lag, 500*time.Millisecond)
	setDur(&o.Resend, 15*time.Second)
	setDur(&o.CheckTimeout, 60*time.Second)
	setDur(&o.RetryMin, DefaultRetryMin)
	setDur(&o.RetryBudget, o.Wait/2)
	if o.RetryAttempts <= 0 {
		o.RetryAttempts = DefaultRetryAttempts
	}
	if o.Log != nil {
		if _, ok := o.Log.(*lockedWriter); !ok {
			o.Log = &lockedWriter{w: o.Log}
		}
	}
	if o.HelloVersion == "" {
		o.HelloVersion = protocol.ProtocolVersion
	}
	if o.DeltaStreams <= 0 {
		o.DeltaStreams = 1024
	}
	if o.DeltaBytes <= 0 {
		o.DeltaBytes = 2 << 20
	}
	return o
}

// Status is a check's outcome.
type Status string

// The three outcomes. Skip is neither pass nor fail: the run could not
// provide what the check needs (an observer, a user, an API key …).
const (
	Pass Status = "pass"
	Fail Status = "FAIL"
	Skip Status = "skip"
)

// Result is one check's outcome.
type Result struct {
	Check   string        `json:"check"`
	Title   string        `json:"title"`
	Rules   []string      `json:"rules"`
	Status  Status        `json:"status"`
	Reason  string        `json:"reason,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Report is the outcome of a run.
type Report struct {
	Side    Side     `json:"side"`
	Results []Result `json:"results"`
}

// OK reports whether no check failed.
func (r *Report) OK() bool { return len(r.Failed()) == 0 }

// Failed returns the names of the failed checks.
func (r *Report) Failed() []string { return r.names(Fail) }

// Skipped returns the names of the skipped checks.
func (r *Report) Skipped() []string { return r.names(Skip) }

func (r *Report) names(s Status) []string {
	var out []string
	for _, res := range r.Results {
		if res.Status == s {
			out = append(out, res.Check)
		}
	}
	return out
}

// Result returns the result of check name.
func (r *Report) Result(name string) (Result, bool) {
	for _, res := range r.Results {
		if res.Check == name {
			return res, true
		}
	}
	return Result{}, false
}

// WriteTable prints one row per check: check, rule IDs, result, and the
// whole reason of failures and skips on one line; then a summary line.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRULES\tRESULT\tREASON")
	pass, fail, skip := 0, 0, 0
	for _, res := range r.Results {
		switch res.Status {
		case Pass:
			pass++
		case Fail:
			fail++
		case Skip:
			skip++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Check, strings.Join(res.Rules, " "), res.Status, oneLine(res.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s side: %d passed, %d failed, %d skipped\n", r.Side, pass, fail, skip)
	return err
}

// WriteJSON prints one JSON object per check.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, res := range r.Results {
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return nil
}

// oneLine folds a reason's whitespace onto one line, keeping all of it.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// selectChecks applies Config.Run.
func selectChecks(side Side, run string) ([]*Check, error) {
	all, err := Checks(side)
	if err != nil {
		return nil, err
	}
	if run == "" {
		return all, nil
	}
	re, err := regexp.Compile(run)
	if err != nil {
		return nil, fmt.Errorf("imv2test: Config.Run: %w", err)
	}
	var out []*Check
	for _, c := range all {
		if re.MatchString(c.Name) {
			out = append(out, c)
		}
	}
	return out, nil
}

// CheckConnector runs the Connector-side checks against c, one after the
// other, and returns the report. Checks that need what c does not provide
// are skipped with the reason. ctx bounds the whole run.
func CheckConnector(ctx context.Context, c Connector, cfg *Config) (*Report, error) {
	o := cfg.withDefaults()
	if c.Handler != nil && c.URL == "" {
		ln := newPipeNet()
		hs := &http.Server{Handler: c.Handler}
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = hs.Serve(ln)
		}()
		defer func() {
			hs.Close()
			<-served
		}()
		c.URL, c.dial = ln.url(), ln.dial
	}
	if c.URL == "" {
		return nil, fmt.Errorf("imv2test: Connector.URL or Handler is required")
	}
	c.URL = strings.TrimRight(c.URL, "/")
	if c.HTTPClient == nil {
		transport := &http.Transport{DialContext: c.dial}
		defer transport.CloseIdleConnections()
		c.HTTPClient = &http.Client{Transport: transport, Timeout: 10 * time.Second}
	}
	checks, err := selectChecks(SideConnector, o.Run)
	if err != nil {
		return nil, err
	}
	rep := &Report{Side: SideConnector}
	retired := map[string]bool{}
	for _, chk := range checks {
		res := Result{Check: chk.Name, Title: chk.Title, Rules: chk.Rules}
		if why := c.missing(chk); why != "" {
			res.Status, res.Reason = Skip, why
			rep.Results = append(rep.Results, res)
			continue
		}
		start := time.Now()
		res.Status, res.Reason = runCheck(ctx, chk, &o, &c, nil, retired)
		res.Elapsed = time.Since(start)
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// missing says why c cannot run chk, or "".
func (c *Connector) missing(chk *Check) string {
	for _, n := range chk.Needs {
		if why := c.unmet(n); why != "" {
			return cmp.Or(c.why[n], why)
		}
	}
	return ""
}

// unmet says why c does not meet need n, or "".
func (c *Connector) unmet(n string) string {
	switch {
	case n == NeedObserver && c.Observer == nil:
		return "needs an observer (the Connector's -json stream; in process RunKit or a RecordingTarget)"
	case n == NeedUser && c.User == nil:
		return "needs a user (a way to make the Connector send a user message)"
	case n == NeedAPIKey && c.APIKey == "":
		return "not applicable: the Connector runs without an API key"
	case n == NeedBuffered && !c.Buffered:
		return "not applicable: the target streams (K5 is about targets that cannot)"
	case n == NeedStreams && c.Buffered:
		return "not applicable: the target cannot stream"
	case n == NeedDeltaTTL && c.DeltaIdleTTL <= 0:
		return "not observable here: the delta idle TTL was not declared (a default of minutes is too long for a run)"
	case n == NeedTyping && c.noTyping:
		return "not applicable: the platform has no typing indicator (connector.Typer), so activity shows nothing (C5)"
	case n == NeedActTTL && c.ActivityTimeout <= 0:
		return "not observable here: the activity timeout was not declared (a default of 30 s is too long for a run)"
	}
	return ""
}
