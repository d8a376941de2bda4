package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/internal/cmdtest"
	"github.com/xagentkit/imv2/internal/testcard"
	"github.com/xagentkit/imv2/metrics"
)

// posts is the smallest Platform: every final is shown.
type posts struct{}

func (posts) Post(context.Context, connector.Conversation, *connector.Message) error { return nil }

// families parses an exposition with the Prometheus library's own text
// parser.
func families(t *testing.T, h http.Handler, key string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	s := httptest.NewServer(h)
	defer s.Close()
	defer http.DefaultClient.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, s.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s:\n%s", resp.Status, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the Prometheus text parser refuses it: %v\n%s", err, body)
	}
	return fams, string(body)
}

// TestKit_MetricsParseWithExpfmtAndCoverTheCollector: the kit's default
// /metrics parses with the Prometheus library's text parser, has every
// family the commands' tests require, and every family this module's
// Collector exports, with the same type, so a dashboard built on either
// reads the other.
func TestKit_MetricsParseWithExpfmtAndCoverTheCollector(t *testing.T) {
	const key = "kit-expfmt-key-0123456789abcdef"
	k, err := connector.New(testcard.IM("console", "Console"), posts{}, &connector.Options{APIKey: key, Advanced: connector.Advanced{MetricsToken: key}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	_, kit := families(t, k, key) // a family without a series yet has only its TYPE line
	declares := func(name string, typ dto.MetricType) bool {
		return strings.Contains(kit, "\n# TYPE "+name+" "+strings.ToLower(typ.String())+"\n")
	}
	for _, f := range cmdtest.MetricFamilies {
		if !strings.Contains(kit, "\n# TYPE "+f+" ") {
			t.Errorf("the kit serves no %s", f)
		}
	}

	// Every event the Collector counts, once, so each of its families has
	// a series.
	m := metrics.New()
	for _, e := range []imv2.Event{
		{Kind: imv2.EventSent, Attempt: 1}, {Kind: imv2.EventAcked, Status: imv2.AckAccepted, Attempt: 1},
		{Kind: imv2.EventFailed, Code: imv2.CodeExpired}, {Kind: imv2.EventDelivered},
		{Kind: imv2.EventTargetFailed}, {Kind: imv2.EventDuplicate},
		{Kind: imv2.EventRejected, Status: imv2.AckRejected, Code: imv2.CodeTargetRejected},
		{Kind: imv2.EventDeltaRejected, Code: imv2.CodeDeltaSequenceGap},
		{Kind: imv2.EventSent, Attempt: 2},
	} {
		m.Observe(e)
	}
	_, _, _ = m.Completed(failingLookup{imv2.NewMemoryCompletedStore(0, 0, nil)}).Lookup(context.Background(), "c", "m")
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	coll, _ := families(t, mux, "")
	if len(coll) != 9 {
		t.Fatalf("the Collector exported %d families, want its 9", len(coll))
	}
	for name, f := range coll {
		if !declares(name, f.GetType()) {
			t.Errorf("the kit serves no %s %s", strings.ToLower(f.GetType().String()), name)
		}
	}
}

// failingLookup fails every Lookup.
type failingLookup struct{ imv2.CompletedStore }

func (failingLookup) Lookup(context.Context, string, string) (imv2.Fingerprint, bool, error) {
	return imv2.Fingerprint{}, false, errors.New("connection reset")
}
