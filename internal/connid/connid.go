// Package connid carries a channel's connector_id (imv2.Options.ConnectorID)
// to a durable completed store on the context of its calls, without an
// exported name: a store shares its capacity per connector_id first, so a
// peer with many channels dilutes its own shares, not another peer's
// (issue 26). The Channel sets it once on the context its store calls
// derive from; a context without one belongs to the group of none.
package connid

import "context"

type key struct{}

// WithConnectorID returns ctx carrying id; an empty id carries none.
func WithConnectorID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, key{}, id)
}

// ConnectorID returns the connector_id ctx carries, or "" for none.
func ConnectorID(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}
