package dataplane

import (
	"context"
	"slices"
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

// maxRoomCandidates bounds the offline instances with channels one hello
// at the cap asks the pending store about (makeRoom), and roomReads
// MaxChannels the channels it reads in all. A candidate's reads stop at
// its first channel with a pending message, so the hello can pass over
// roomReads instances holding pending messages, each read in full, to
// find one that holds none: such instances are a real xAgent's (a peer
// cannot put a user message in its own channels), and a hello costs at
// most roomReads·MaxChannels store reads whatever the instances hold.
const (
	maxRoomCandidates = 8
	roomReads         = 4
)

// makeRoom frees a connector_id slot for a hello that needs a new one
// while the Server holds MaxConnectors, when no offline instance without
// channels can give way (attach evicts such one itself): the offline
// instance seen least recently whose channels hold no pending message is
// dropped, its channels with it (OnChannelDrop, then the Registry forgets
// them). Without it 63 hellos that each opened a channel and went away
// filled the slots, and every fresh hello was refused for the 1 h grace
// (issue 37). An instance with pending messages, or online, is never
// taken: what it holds would be lost. The pending store is read outside
// s.mu; the candidate is dropped only if it is still offline, unchanged
// since (gen) and its channels are the ones read.
func (s *Server) makeRoom(ctx context.Context, connectorID string) {
	type candidate struct {
		inst     *instance
		gen      uint64
		offline  time.Time
		channels []*channelEntry
	}
	s.mu.Lock()
	if _, known := s.instances[connectorID]; known || len(s.instances) < s.cfg.MaxConnectors {
		s.mu.Unlock()
		return
	}
	var offline []*instance
	for _, inst := range s.instances {
		if inst.live == 0 {
			if len(inst.channels) == 0 {
				s.mu.Unlock()
				return // attach evicts it
			}
			offline = append(offline, inst)
		}
	}
	slices.SortFunc(offline, func(a, b *instance) int { return a.offline.Compare(b.offline) })
	var cands []candidate
	for _, inst := range offline[:min(len(offline), maxRoomCandidates)] {
		c := candidate{inst: inst, gen: inst.gen, offline: inst.offline}
		for _, e := range inst.channels {
			c.channels = append(c.channels, e)
		}
		cands = append(cands, c)
	}
	s.mu.Unlock()

	reads := roomReads * s.cfg.MaxChannels
	for _, c := range cands {
		if reads <= 0 {
			return
		}
		// Connected to another replica since: only the local copies go,
		// as at its grace expiry (expire).
		elsewhere := s.aliveElsewhere(c.inst.id, c.offline)
		if !elsewhere && !s.nothingPending(ctx, c.channels, &reads) {
			continue
		}
		s.mu.Lock()
		same := !s.closed && s.instances[c.inst.id] == c.inst && c.inst.live == 0 && c.inst.gen == c.gen && len(c.inst.channels) == len(c.channels)
		for _, e := range c.channels {
			same = same && c.inst.channels[e.id] == e
		}
		switch {
		case same && elsewhere:
			s.log.Info("dataplane: connector_id cap reached; an offline connector_id connected elsewhere releases its channels here", "connector_id", c.inst.id, "channels", len(c.channels))
			s.releaseInstanceLocked(c.inst)
		case same:
			s.log.Info("dataplane: connector_id cap reached; the offline connector_id seen least recently with nothing pending gives way", "connector_id", c.inst.id, "channels", len(c.channels))
			s.dropInstanceLocked(c.inst)
			if s.sharedConnectors() != nil {
				s.dropWG.Add(1)
				go func() { defer s.dropWG.Done(); s.forgetShared(c.inst.id) }()
			}
		}
		s.mu.Unlock()
		if same {
			return
		}
	}
}

// nothingPending reports whether no channel of channels holds a pending
// message, counting each store read against *reads; a store error, or
// reads running out first, counts as pending (nothing is dropped on a
// guess).
func (s *Server) nothingPending(ctx context.Context, channels []*channelEntry, reads *int) bool {
	ctx, cancel := context.WithTimeout(ctx, openStoreTimeout)
	defer cancel()
	for _, e := range channels {
		if *reads <= 0 {
			return false
		}
		*reads--
		p, err := e.ch.Pending(ctx)
		if err != nil || len(p) > 0 {
			return false
		}
	}
	return true
}
