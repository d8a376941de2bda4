package dataplane

import (
	"context"
	"errors"
	"time"

	"github.com/xagentkit/imv2"
)

// openStoreTimeout bounds each store call of a hello or channel.open (the
// shared registry's ConnectorSeen, the Registry's Known and Register), so
// a database that stopped answering is refused well within the peer's
// own wait for the answer (DefaultRequestTimeout, 10 s): a refusal is
// retried with backoff, a silence costs the peer a reconnect. A wall-clock
// deadline, as every bound on store I/O of the Server (ServerConfig.Clock).
const openStoreTimeout = 5 * time.Second

// storeCall returns the context of one store call of a hello or
// channel.open: the connection's, bounded by openStoreTimeout.
func (ss *session) storeCall() (context.Context, context.CancelFunc) {
	return context.WithTimeout(ss.ctx, openStoreTimeout)
}

// storeUnavailable turns the failure of a store call during a hello or a
// channel.open into the refusal the peer retries: connector_channel_unavailable,
// retryable. The request was valid; the state that would answer it is out
// of reach for now (a database restarting, failing over or overloaded),
// and nothing was decided on a guess: no connector_id or channel ID is
// issued in place of one the store could not confirm. An *imv2.Error is a
// refusal the store chose itself (a registry at its cap) and is kept.
func storeUnavailable(what string, err error) error {
	var e *imv2.Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	e = imv2.Errorf(imv2.CodeChannelUnavailable, "%s: the store is unavailable, try again: %w", what, err)
	e.Retryable = true
	return e
}

// refuse answers a hello or channel.open that failed with err. A failure
// that is no *imv2.Error (a hook's, a store's) says nothing about the
// packet, which was valid, so it is connector_channel_unavailable, never
// invalid_packet: the xAgent side retries that refusal with backoff.
func (ss *session) refuse(req *imv2.Packet, err error) {
	ss.send(imv2.NewErrorPacket(req, imv2.AsError(err, imv2.CodeChannelUnavailable)))
}

// recordSeen tells the shared registry that connectorID connected here
// now, before the hello is answered: a connector_id acknowledged is then
// known to every replica, even if this one dies at once. It runs on the
// connection's reader, so it is bounded by openStoreTimeout (or the
// heartbeat interval, if shorter) rather than the heartbeat's bound alone;
// a record that fails is logged and written by the next heartbeat.
func (ss *session) recordSeen(connectorID string) {
	cr := ss.srv.sharedConnectors()
	if cr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ss.ctx, min(openStoreTimeout, ss.srv.cfg.OfflineGrace/heartbeatsPerGrace))
	defer cancel()
	if err := cr.SeenConnector(ctx, connectorID, ss.srv.clock.Now()); err != nil {
		ss.log.Warn("dataplane: connector_id not recorded in the shared registry", "connector_id", connectorID, "err", err)
	}
}
