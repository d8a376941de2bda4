package imv2

import (
	"bytes"
	"context"

	"github.com/xagentkit/imv2/internal/resultbound"
)

// RecordResult implements state.ResultStore: the record as Record makes it,
// and a copy of result kept beside it until the record leaves the FIFO
// (dropResult), however it leaves.
func (s *memoryCompletedStore) RecordResult(ctx context.Context, channelID, messageID string, fp Fingerprint, result []byte) error {
	if len(result) > resultbound.Max {
		return Errorf(CodeInvalidPacket, "result is %d bytes; at most %d are kept", len(result), resultbound.Max)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recordLocked(ctx, channelID, messageID, fp)
	k := completedKey{channelID, messageID}
	if _, ok := s.lru.Peek(k); !ok { // made room for itself already: not kept
		return nil
	}
	if s.results == nil {
		s.results = map[completedKey][]byte{}
	}
	s.results[k] = bytes.Clone(result)
	return nil
}

// LookupResult implements state.ResultStore.
func (s *memoryCompletedStore) LookupResult(_ context.Context, channelID, messageID string) (Fingerprint, []byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := completedKey{channelID, messageID}
	if s.lru == nil {
		return Fingerprint{}, nil, false, nil
	}
	r, ok := s.lru.Peek(k)
	if !ok || !s.clock.Now().Before(r.expires) {
		return Fingerprint{}, nil, false, nil
	}
	return r.fp, bytes.Clone(s.results[k]), true, nil
}

// dropResult forgets the result of a record leaving the FIFO.
func (s *memoryCompletedStore) dropResult(k completedKey) {
	if s.results != nil {
		delete(s.results, k)
	}
}
