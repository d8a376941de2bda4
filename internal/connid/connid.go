// Package connid carries a channel's connector_id (imv2.Options.ConnectorID)
// to a durable completed store on the context of its calls, without an
// exported name: a store shares its capacity per connector_id first, so a
// peer with many channels dilutes its own shares, not another peer's
// (issue 26). The Channel sets it once on the context its store calls
// derive from; a context without one belongs to the group of none.
package connid

import "context"

type key struct{}

// valueCtx is context.WithValue(parent, key{}, id) in one allocation of
// 32 B, where WithValue makes two (64 B: its context and the boxed string):
// every Channel carries one for its life (BenchmarkIdleChannels).
type valueCtx struct {
	context.Context
	id string
}

// Value returns c itself for key{}, so ConnectorID reads the id without
// boxing it.
func (c *valueCtx) Value(k any) any {
	if k == (key{}) {
		return c
	}
	return c.Context.Value(k)
}

// WithConnectorID returns ctx carrying id; an empty id carries none.
func WithConnectorID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return &valueCtx{Context: ctx, id: id}
}

// ConnectorID returns the connector_id ctx carries, or "" for none.
func ConnectorID(ctx context.Context) string {
	if c, ok := ctx.Value(key{}).(*valueCtx); ok {
		return c.id
	}
	return ""
}
