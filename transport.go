package imv2

import "context"

// Transport carries a Channel's outbound packets to its peer. It is the whole
// contract between the profile runtime and a connection: inbound packets are
// handed to Channel.Receive by whoever reads the connection.
//
// Send must be safe for concurrent use. An error means the packet may not
// have left; the Channel keeps it pending and sends it again (S2).
type Transport interface {
	Send(ctx context.Context, p *Packet) error
}

// TransportFunc adapts a function to Transport.
type TransportFunc func(ctx context.Context, p *Packet) error

// Send calls f(ctx, p).
func (f TransportFunc) Send(ctx context.Context, p *Packet) error { return f(ctx, p) }
