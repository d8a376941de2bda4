package connid

import (
	"context"
	"testing"
)

func TestConnectorID(t *testing.T) {
	ctx := context.Background()
	if got := ConnectorID(ctx); got != "" {
		t.Fatalf("no id: %q", got)
	}
	if got := ConnectorID(WithConnectorID(ctx, "")); got != "" {
		t.Fatalf("empty id: %q", got)
	}
	if got := ConnectorID(WithConnectorID(ctx, "c1")); got != "c1" {
		t.Fatalf("got %q, want c1", got)
	}
}
