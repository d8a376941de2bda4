package dataplane

import (
	"context"
	"log/slog"

	"github.com/xagentkit/imv2"
)

// NewLoggingConn decorates c: every packet read or written is logged at
// debug level with its envelope (type, packet_id, request_id, reply_to,
// connector_channel_id, error code), and read, write and close failures
// at the level they deserve. Payloads are never logged: auth.start carries
// form input such as bot tokens.
func NewLoggingConn(c Conn, logger *slog.Logger) Conn {
	if logger == nil {
		return c
	}
	return &loggingConn{c: c, log: logger}
}

type loggingConn struct {
	c   Conn
	log *slog.Logger
}

func envelopeAttrs(dir string, p *imv2.Packet) []any {
	attrs := []any{"dir", dir}
	if p == nil {
		return attrs
	}
	attrs = append(attrs, "type", p.Type, "packet_id", p.PacketID)
	if p.RequestID != "" {
		attrs = append(attrs, "request_id", p.RequestID)
	}
	if p.ReplyTo != "" {
		attrs = append(attrs, "reply_to", p.ReplyTo)
	}
	if p.ConnectorChannelID != "" {
		attrs = append(attrs, "connector_channel_id", p.ConnectorChannelID)
	}
	if p.Error != nil {
		attrs = append(attrs, "error_code", string(p.Error.Code))
	}
	return attrs
}

// Read implements Conn.
func (l *loggingConn) Read(ctx context.Context) (*imv2.Packet, error) {
	p, err := l.c.Read(ctx)
	l.logRead(ctx, p, err)
	return p, err
}

func (l *loggingConn) logRead(ctx context.Context, p *imv2.Packet, err error) {
	switch {
	case err == nil:
		if l.log.Enabled(ctx, slog.LevelDebug) { // skip building the attributes
			l.log.DebugContext(ctx, "dataplane packet", envelopeAttrs("in", p)...)
		}
	case imv2.AsError(err, "").Code == imv2.CodeInvalidPacket:
		l.log.WarnContext(ctx, "dataplane invalid frame", append(envelopeAttrs("in", p), "err", err)...)
	default:
		l.log.DebugContext(ctx, "dataplane read ended", "err", err)
	}
}

// serve implements servingConn when the decorated Conn does: each frame
// is logged as Read logs it, on the reader goroutine.
func (l *loggingConn) serve(ctx context.Context, h func(*imv2.Packet, error)) error {
	err := readEach(ctx, l.c, func(p *imv2.Packet, err error) {
		l.logRead(ctx, p, err)
		h(p, err)
	})
	l.logRead(ctx, nil, err)
	return err
}

// Write implements Conn.
func (l *loggingConn) Write(ctx context.Context, p *imv2.Packet) error {
	err := l.c.Write(ctx, p)
	if err != nil {
		l.log.WarnContext(ctx, "dataplane write failed", append(envelopeAttrs("out", p), "err", err)...)
		return err
	}
	if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.DebugContext(ctx, "dataplane packet", envelopeAttrs("out", p)...)
	}
	return nil
}

// Close implements Conn.
func (l *loggingConn) Close() error {
	l.log.Debug("dataplane close")
	return l.c.Close()
}
