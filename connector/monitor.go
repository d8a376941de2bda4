package connector

import (
	"context"
	"net"
	"net/http"
)

// serveMetrics answers GET /metrics on the Connector's own address. A
// scraper does not hold xAgent's credential: with Advanced.MetricsToken
// set it needs that token (the API key does not open it); without one,
// a Connector with an API key does not serve /metrics here at all (404:
// serve it on an address of its own with StartMonitor), and one without
// an API key serves it open, as it serves everything.
func (c *Connector) serveMetrics(w http.ResponseWriter, r *http.Request) {
	switch {
	case c.scrape.Set():
		if !c.scrape.Allow(r.Header.Get("Authorization")) {
			c.log.Info("connector: unauthorized metrics request", "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "missing or wrong metrics token", http.StatusUnauthorized)
			return
		}
	case c.handler.key.Set():
		http.Error(w, "metrics are not served on this address: scrape the monitoring address, or set a metrics token", http.StatusNotFound)
		return
	}
	c.metrics.ServeHTTP(w, r)
}

// monitor is the handler of StartMonitor's address: /metrics (behind
// Advanced.MetricsToken when set, never behind the API key), /livez and
// /readyz; nothing else.
func (c *Connector) monitor(w http.ResponseWriter, r *http.Request) {
	if c.serveProbe(w, r) {
		return
	}
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	if !c.scrape.Allow(r.Header.Get("Authorization")) {
		c.log.Info("connector: unauthorized metrics request", "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
		http.Error(w, "missing or wrong metrics token", http.StatusUnauthorized)
		return
	}
	c.metrics.ServeHTTP(w, r)
}

// StartMonitor listens on addr and serves, until Close, what a monitoring
// system reads: GET /metrics (open, or behind Advanced.MetricsToken when
// set; xAgent's API key never opens it), /livez and /readyz. Give it an
// address a scraper reaches and xAgent's network does not (a private
// interface, 127.0.0.1 beside a sidecar). It returns the base URL,
// http://host:port; after Close it fails with imv2.ErrClosed.
func (c *Connector) StartMonitor(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	hs, err := c.registerHandler(ln, http.HandlerFunc(c.monitor))
	if err != nil {
		return "", err
	}
	go func() {
		if err := c.serve(context.Background(), hs, ln); err != nil {
			c.log.Error("connector: serving the monitoring address failed", "err", err)
		}
	}()
	return "http://" + ln.Addr().String(), nil
}
