package main

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdtest"
	"github.com/xagentkit/imv2/internal/testwait"
)

// dirEnv passes the parent test's directory to the child that runs main
// (which exits without the cleanup a t.TempDir of its own would need).
const dirEnv = "TELEGRAM_TEST_DIR"

const (
	metricsKey = "telegram-metrics-key-0123456789"
	botToken   = "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi"
)

// The lines naming the addresses the bridge serves on.
var (
	listening  = regexp.MustCompile(`^telegram: listening on (\S+) `)
	monitoring = regexp.MustCompile(`^telegram: monitoring on (\S+)$`)
)

// botAPI is the least of a Bot API server the bridge starts against:
// getMe names the bot, deleteWebhook (New's, before polling) succeeds,
// getUpdates holds the long poll until the bridge drops it, and every
// other method is unknown (404, as the Bot API answers one).
func botAPI(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch strings.TrimPrefix(r.URL.Path, "/bot"+botToken+"/") {
		case "getMe":
			_, _ = w.Write([]byte(`{"ok":true,"result":{"id":123456,"is_bot":true,"first_name":"Test","username":"test_bot"}}`))
		case "deleteWebhook":
			_, _ = w.Write([]byte(`{"ok":true,"result":true}`))
		case "getUpdates":
			<-r.Context().Done()
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"ok":false,"error_code":404,"description":"Not Found"}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// serving runs the bridge (cmdtest.Main) in buffer mode against botAPI,
// with the API key metricsKey, the environment env and args, and returns
// the base URLs it says it listens on and, with -metrics-addr, monitors
// on ("" without).
func serving(t *testing.T, env []string, args ...string) (base, monitor string) {
	t.Helper()
	dir := os.Getenv(dirEnv)
	if dir == "" {
		dir = t.TempDir()
	}
	tokenFile := filepath.Join(dir, "bot-token")
	if err := os.WriteFile(tokenFile, []byte(botToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := cmdtest.Main(t, "telegram-connector", main, append([]string{"-listen", "127.0.0.1:0", "-state", filepath.Join(dir, "state"),
		"-token-file", tokenFile, "-server", botAPI(t), "-mode", "buffer"}, args...)...)
	cmd.Env = append(cmd.Env, append([]string{cmdflags.KeyEnv + "=" + metricsKey, cmdflags.MetricsEnv + "=", dirEnv + "=" + dir}, env...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	type addrs struct{ base, monitor, said string }
	got := make(chan addrs, 1)
	go func() { // ends when the process exits or is killed at cleanup
		sc := bufio.NewScanner(stderr)
		var a addrs
		for sc.Scan() {
			a.said += sc.Text() + "\n"
			if m := monitoring.FindStringSubmatch(sc.Text()); m != nil {
				a.monitor = m[1]
			}
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				a.base = "http://" + m[1] // said after the monitoring line
				got <- a
				for sc.Scan() { // keep stderr drained
				}
				return
			}
		}
		got <- a
	}()
	a := testwait.Recv(t, (<-chan addrs)(got), 30*time.Second)
	if a.base == "" {
		t.Fatalf("the bridge did not start:\n%s", a.said)
	}
	return a.base, a.monitor
}

// TestMetrics_ServedApartFromTheKey: a scraper needs no API key, and
// xAgent's key never opens /metrics (cmdtest.CheckMetricsApart: open on
// -metrics-addr; a token from -metrics-token-file or
// $XAGENT_METRICS_TOKEN opens it on both addresses, and only it).
func TestMetrics_ServedApartFromTheKey(t *testing.T) {
	cmdtest.CheckMetricsApart(t, serving, metricsKey, "telegram-scraper-token-0123456789", nil)
}
