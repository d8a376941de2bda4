package imv2

import (
	"context"
	"log/slog"
)

// LoggingTransport decorates a Transport with one debug line per packet:
// type, packet_id, reply_to, channel and payload size. Payload content is
// never logged: it may hold user text.
type LoggingTransport struct {
	Transport Transport
	Logger    *slog.Logger
}

// NewLoggingTransport returns t logging to logger.
func NewLoggingTransport(t Transport, logger *slog.Logger) *LoggingTransport {
	return &LoggingTransport{Transport: t, Logger: logger}
}

// Send logs p, then sends it.
func (l *LoggingTransport) Send(ctx context.Context, p *Packet) error {
	err := l.Transport.Send(ctx, p)
	l.Logger.LogAttrs(ctx, slog.LevelDebug, "send",
		slog.String("type", p.Type),
		slog.String("packet_id", p.PacketID),
		slog.String("reply_to", p.ReplyTo),
		slog.String("connector_channel_id", p.ConnectorChannelID),
		slog.Int("payload_bytes", len(p.Payload)),
		slog.Any("err", err))
	return err
}
