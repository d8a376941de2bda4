package dataplane

import (
	"context"
	"time"

	"github.com/xagentkit/imv2/state"
)

// heartbeatsPerGrace is how often, per OfflineGrace, a Server records its
// live connector_ids in a shared state.ConnectorRegistry: a connector_id live on
// one replica is then seen again within a quarter of the grace after
// another replica saw it go offline, so that replica's expiry knows it
// lives on (a cut the other replica noticed late included).
const heartbeatsPerGrace = 4

// startHeartbeat arms the heartbeat when the Registry is shared.
func (s *Server) startHeartbeat() {
	if s.sharedConnectors() == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beat = s.clock.AfterFunc(s.cfg.OfflineGrace/heartbeatsPerGrace, s.heartbeat)
}

// heartbeat records every connector_id with a live connection here, then
// rearms itself until Close.
func (s *Server) heartbeat() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.beatWG.Add(1)
	defer s.beatWG.Done()
	var live []string
	for id, inst := range s.instances {
		if inst.live > 0 {
			live = append(live, id)
		}
	}
	s.mu.Unlock()
	now := s.clock.Now()
	for _, id := range live {
		s.seen(id, now)
	}
	s.mu.Lock()
	if !s.closed {
		s.beat = s.clock.AfterFunc(s.cfg.OfflineGrace/heartbeatsPerGrace, s.heartbeat)
	}
	s.mu.Unlock()
}

// stopHeartbeat stops the heartbeat and waits for a running one; Close
// calls it after marking the Server closed.
func (s *Server) stopHeartbeat() {
	s.mu.Lock()
	if s.beat != nil {
		s.beat.Stop()
	}
	s.mu.Unlock()
	s.beatWG.Wait()
}

// sharedConnectors returns the Registry as a state.ConnectorRegistry, or nil.
func (s *Server) sharedConnectors() state.ConnectorRegistry {
	cr, _ := s.cfg.Registry.(state.ConnectorRegistry)
	return cr
}

// knownElsewhere reports whether another replica issued connectorID and
// has not forgotten it, so the hello keeps it. A store error is returned
// (storeUnavailable): the hello is refused for now and retried, where a
// new connector_id would take the channels of the one it cannot confirm
// away from xAgent for good.
func (ss *session) knownElsewhere(connectorID string) (bool, error) {
	s := ss.srv
	cr := s.sharedConnectors()
	if cr == nil || connectorID == "" {
		return false, nil
	}
	s.mu.Lock()
	_, local := s.instances[connectorID]
	s.mu.Unlock()
	if local {
		return false, nil
	}
	ctx, cancel := ss.storeCall()
	defer cancel()
	_, ok, err := cr.ConnectorSeen(ctx, connectorID)
	if err != nil {
		s.log.Warn("dataplane: shared connector registry unreadable; hello refused for now", "connector_id", short(connectorID), "err", err)
		return false, storeUnavailable("connector.hello", err)
	}
	return ok, nil
}

// seen tells the shared registry that connectorID connected, or lost its
// last connection, here at t. A disconnect passes the instance's offline
// time itself, so that its own record never counts as "connected
// elsewhere since" at the grace expiry. The write is bounded by the
// heartbeat interval: a hung store must not hold the heartbeat, and so
// Close, which waits for it; a record missed is written by the next beat.
func (s *Server) seen(connectorID string, t time.Time) {
	cr := s.sharedConnectors()
	if cr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OfflineGrace/heartbeatsPerGrace)
	defer cancel()
	if err := cr.SeenConnector(ctx, connectorID, t); err != nil {
		s.log.Warn("dataplane: connector_id not recorded in the shared registry", "connector_id", connectorID, "err", err)
	}
}

// aliveElsewhere reports whether connectorID connected to some replica
// after this one saw it go offline, in which case the grace expiry here
// drops only local copies. A store error counts as alive: shared state is
// never forgotten on an error.
func (s *Server) aliveElsewhere(connectorID string, offline time.Time) bool {
	cr := s.sharedConnectors()
	if cr == nil {
		return false
	}
	t, ok, err := cr.ConnectorSeen(context.Background(), connectorID)
	if err != nil {
		s.log.Warn("dataplane: shared connector registry unreadable at grace expiry; keeping shared state", "connector_id", connectorID, "err", err)
		return true
	}
	return ok && t.After(offline)
}

// forgetShared removes an expired connector_id from the shared registry.
func (s *Server) forgetShared(connectorID string) {
	if cr := s.sharedConnectors(); cr != nil {
		if err := cr.ForgetConnector(context.Background(), connectorID); err != nil {
			s.log.Warn("dataplane: expired connector_id not forgotten by the shared registry", "connector_id", connectorID, "err", err)
		}
	}
}

// releaseInstanceLocked forgets an instance on this replica only: its
// Channels are closed (pending and completed state stay in the shared
// stores), nothing shared is forgotten and OnChannelDrop is not called,
// since the channels live on at another replica.
func (s *Server) releaseInstanceLocked(inst *instance) {
	delete(s.instances, inst.id)
	if inst.grace != nil {
		inst.grace.Stop()
		inst.grace = nil
	}
	for _, e := range inst.channels {
		delete(s.channels, e.id)
		s.dropWG.Add(1)
		go func() {
			defer s.dropWG.Done()
			_ = e.ch.Close()
		}()
	}
	inst.channels = map[string]*channelEntry{}
}
