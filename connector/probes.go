package connector

import (
	"context"
	"net/http"
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

// readyProbeChannel is the channel ID /readyz registers and forgets to
// prove the Store takes writes; issued IDs never take this form.
const readyProbeChannel = "readyz-probe"

// readyWriteWindow is how recent a successful write of the kit's must be
// for /readyz to count the Store writable without a probe of its own:
// Kubernetes' default probe period.
const readyWriteWindow = 10 * time.Second

// serveProbe answers the Kubernetes-style probes, without the API key
// (a probe carries no secret, and the bodies say nothing secret):
//
//   - GET /livez: 200 "ok" while the process serves HTTP at all.
//   - GET /readyz: 200 "ready" when the Connector takes new work, else
//     503 with the first reason: shutting down, the Store refuses a
//     write (a write of the kit's that succeeded in the last
//     readyWriteWindow counts; else a probe writes), or the Platform's
//     ReadyChecker reports a failure.
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

// notReady returns why the Connector should get no new work, or "".
// Details go to the log; the body names the part that failed.
func (c *Connector) notReady(ctx context.Context) string {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed || c.drain.isStopping() {
		return "shutting down"
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	// A write of the kit's that succeeded within readyWriteWindow proves
	// the store writable; without one (idle, or the last write failed)
	// a probe writes, so a busy Connector's probes cost no write.
	if !c.counted.wroteWithin(readyWriteWindow) {
		if err := c.counted.probe(ctx); err != nil {
			c.log.Warn("connector: not ready: the store refuses a write", "err", err)
			return "store not writable"
		}
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
