package connid

import (
	"context"
	"strings"
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

// The id reaches a store through the contexts the Channel derives from
// its own; a nested id wins, and the parent's other values stay readable.
func TestConnectorID_ThroughDerivedContexts(t *testing.T) {
	type other struct{}
	base := context.WithValue(context.Background(), other{}, "v")
	ctx, cancel := context.WithCancel(WithConnectorID(base, "c1"))
	defer cancel()
	if got := ConnectorID(ctx); got != "c1" {
		t.Fatalf("under WithCancel: got %q, want c1", got)
	}
	if got := ctx.Value(other{}); got != "v" {
		t.Fatalf("parent's value: got %v, want v", got)
	}
	if got := ConnectorID(WithConnectorID(ctx, "c2")); got != "c2" {
		t.Fatalf("nested: got %q, want c2", got)
	}
}

// One allocation per context carrying an id (it lives as long as its
// Channel), none per read.
func TestConnectorID_Allocations(t *testing.T) {
	bg := context.Background()
	id := strings.Repeat("c", 40) // not a constant: as a Channel's, made at run time
	if n := testing.AllocsPerRun(100, func() { sink = WithConnectorID(bg, id) }); n != 1 {
		t.Errorf("WithConnectorID: %v allocations, want 1", n)
	}
	ctx := WithConnectorID(bg, id)
	if n := testing.AllocsPerRun(100, func() { idSink = ConnectorID(ctx) }); n != 0 {
		t.Errorf("ConnectorID: %v allocations, want 0", n)
	}
}

var (
	sink   context.Context
	idSink string
)
