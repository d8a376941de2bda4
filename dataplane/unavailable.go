package dataplane

import "net/http"

// SetUnavailable makes the Server refuse xAgent's connections for reason
// ("" takes them again): new WebSocket upgrades are answered 503 with
// reason, and the connections open now are closed, as a network failure
// would close them (their channels go offline, their offline grace
// starts). A Connector that cannot reach its Store calls it so xAgent
// reconnects to a replica that can serve, rather than holding a
// connection every channel.open and final of which is refused.
func (s *Server) SetUnavailable(reason string) {
	s.mu.Lock()
	was := s.unavailable
	s.unavailable = reason
	var drop []*session
	if reason != "" && was == "" {
		for ss := range s.sessions {
			drop = append(drop, ss)
		}
	}
	s.mu.Unlock()
	for _, ss := range drop {
		ss.cancel()
		_ = ss.conn.Close()
	}
}

// refuseUnavailable answers an upgrade 503 while SetUnavailable holds a
// reason, and reports whether it did.
func (s *Server) refuseUnavailable(w http.ResponseWriter) bool {
	s.mu.Lock()
	reason := s.unavailable
	s.mu.Unlock()
	if reason == "" {
		return false
	}
	http.Error(w, "connector unavailable: "+reason+"; try another replica or later", http.StatusServiceUnavailable)
	return true
}
