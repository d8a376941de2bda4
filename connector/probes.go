package connector

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// ReadyChecker is an optional Platform capability: Ready reports whether
// the platform side can serve now — its reader (Listener) receives, its
// API answers — with an error saying why not. /readyz asks it; a
// Platform without it counts as ready.
type ReadyChecker interface {
	Ready(ctx context.Context) error
}

// ProbeTimeout bounds each check of /readyz.
const ProbeTimeout = 2 * time.Second

// ReadyInterval is how long /readyz reuses its verdict: the store and
// platform checks run at most once per ReadyInterval whatever the request
// rate, so a flood of unauthenticated probes costs at most one probe write
// (a Register and a Forget of readyProbeChannel) per interval, and a
// verdict is at most ReadyInterval plus ProbeTimeout old. A write of the
// kit's that succeeded within it stands in for the probe; one that failed
// since the previous verdict, with no success after it, makes the
// Connector not ready without a probe (a full disk refuses the kit's claims and records while a probe's
// small write may still fit).
const ReadyInterval = 5 * time.Second

// readyProbeChannel is the channel ID /readyz registers and forgets to
// prove the Store takes writes; issued IDs never take this form.
const readyProbeChannel = "readyz-probe"

// serveProbe answers the Kubernetes-style probes, without the API key
// (a probe carries no secret, and the bodies say nothing secret):
//
//   - GET /livez: 200 "ok" while the process serves HTTP at all.
//   - GET /readyz: 200 "ready" when the Connector takes new work, else
//     503 with the first reason: "shutting down", "store unreachable" (a
//     replica that let xAgent's connection go, StoreLossGrace), "store
//     not writable"
//     (the store refused the kit's last write or the probe's within
//     ReadyInterval), or "platform: …" (the Platform's ReadyChecker
//     reports a failure). xAgent being connected or not does not count:
//     xAgent is the client, and a readiness-gated load balancer must let
//     it reach a Connector it has not reached yet. The verdict is reused
//     for ReadyInterval.
//
// It reports whether r was a probe.
func (c *Connector) serveProbe(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != "/livez" && r.URL.Path != "/readyz" {
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return true
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Path == "/livez" {
		http.Error(w, "ok", http.StatusOK)
		return true
	}
	if reason := c.notReady(r.Context()); reason != "" {
		http.Error(w, "not ready: "+reason, http.StatusServiceUnavailable)
		return true
	}
	http.Error(w, "ready", http.StatusOK)
	return true
}

// readiness is /readyz's cached verdict: one check at a time, at most one
// per ReadyInterval; requests meanwhile share its verdict.
type readiness struct {
	mu       sync.Mutex
	at       time.Time     // when the verdict's check began (zero: none yet)
	reason   string        // "" when ready
	checking chan struct{} // non-nil while a check runs; closed when it ends
}

// notReady returns why the Connector should get no new work, or "".
// Shutting down is seen at once; the store and platform verdict is
// refreshed at most once per ReadyInterval.
func (c *Connector) notReady(ctx context.Context) string {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed || c.drain.isStopping() {
		return "shutting down"
	}
	if c.stWatch.isLost() {
		return "store unreachable"
	}
	rd := &c.ready
	rd.mu.Lock()
	for {
		if !rd.at.IsZero() && c.clock.Now().Sub(rd.at) < ReadyInterval {
			reason := rd.reason
			rd.mu.Unlock()
			return reason
		}
		if rd.checking == nil {
			break
		}
		wait := rd.checking
		rd.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return "probe cancelled"
		}
		rd.mu.Lock()
	}
	began, prev, done := c.clock.Now(), rd.at, make(chan struct{})
	rd.checking = done
	rd.mu.Unlock()
	// Not the request's context: a prober hanging up must not become
	// the verdict the next requests share.
	reason := c.check(prev)
	rd.mu.Lock()
	rd.at, rd.reason, rd.checking = began, reason, nil
	rd.mu.Unlock()
	close(done)
	return reason
}

// check runs the store and platform checks, each bounded by
// ProbeTimeout; prev is when the previous check began. Details go to the
// log (at most once per ReadyInterval); the reason names the part that
// failed.
func (c *Connector) check(prev time.Time) string {
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
	defer cancel()
	if err := c.counted.writable(ctx, prev); err != nil {
		c.log.Warn("connector: not ready: the store refuses writes", "err", err)
		return "store not writable"
	}
	if rc, ok := c.platform.(ReadyChecker); ok {
		if err := rc.Ready(ctx); err != nil {
			c.log.Warn("connector: not ready: the platform reports a failure", "err", err)
			return "platform: " + truncateReason(err.Error())
		}
	}
	return ""
}

// truncateReason bounds a platform's reason in the probe body.
func truncateReason(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
