package connector

import (
	"net/http"
	"time"
)

// Timeouts of NewServer.
const (
	// ServerReadHeaderTimeout bounds reading request headers (slowloris).
	ServerReadHeaderTimeout = 10 * time.Second
	// ServerReadTimeout bounds reading a whole request, body included: a
	// 32 MiB upload at about 110 KB/s. The /ws upgrade clears the
	// deadline once it hijacks the connection (gorilla/websocket does).
	ServerReadTimeout = 5 * time.Minute
	// ServerIdleTimeout closes idle keep-alive connections.
	ServerIdleTimeout = 2 * time.Minute
	// ServerMaxHeaderBytes bounds request headers.
	ServerMaxHeaderBytes = 64 << 10
)

// NewServer returns an http.Server for h on addr with timeouts against slow
// clients and the default ServerLimits on its connections. WriteTimeout
// stays zero because it would cut /ws; the Handler sets a per-request
// write deadline on downloads (HandlerConfig.DownloadTimeout) and a read deadline
// on uploads (proportional to their size) instead.
func NewServer(addr string, h http.Handler) *http.Server {
	return NewServerLimits(addr, h, ServerLimits{})
}

// NewServerLimits is NewServer with the given connection caps. The caps
// live in the server's ConnContext and ConnState hooks: replacing either
// hook turns them off.
func NewServerLimits(addr string, h http.Handler, lim ServerLimits) *http.Server {
	l := newConnLimiter(lim)
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: ServerReadHeaderTimeout,
		ReadTimeout:       ServerReadTimeout,
		IdleTimeout:       ServerIdleTimeout,
		MaxHeaderBytes:    ServerMaxHeaderBytes,
		ConnContext:       l.connContext,
		ConnState:         l.connState,
	}
}
