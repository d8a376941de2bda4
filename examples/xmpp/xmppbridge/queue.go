package xmppbridge

import (
	"slices"
	"sync"
)

// Bounds of a reader's queue: what it holds in memory of its
// conversation while the kit cannot take more (xAgent does not ack and
// the channel's pending store is full). Past them a message is not held
// but read again from the server's archive (XEP-0313) once there is room;
// without an archive it is dropped, with a log line. The senders it
// tracks (by nick, remote input) are at most readerQueue with messages
// held plus maxGapSenders in a gap or a tail; one leaves when it has
// nothing held and no catch-up pending. The catch-up holds at most one
// page (archivePage) on top of readerQueue.
const (
	// occupantQueue bounds the messages of one sender held: a room
	// occupant's flood fills its own share, never another's.
	occupantQueue = 64
	// readerQueue bounds the messages of every sender of the conversation
	// held (with 64 KiB stanzas, at most 16 MiB of text).
	readerQueue = 256
	// maxGapSenders bounds the senders whose messages wait in the archive;
	// past it a sender over its share has its message dropped.
	maxGapSenders = 1024
	// maxTailSeen bounds the IDs remembered while a catch-up ends; past
	// it the kit's own deduplication (completed records) stands alone.
	maxTailSeen = 4096
)

// queued is a message held for the kit.
type queued struct {
	in       incoming
	archived bool // read from the archive by a catch-up, not from the stream
	// tail: from the stream while its sender was in a tail, so newer than
	// what that tail's catch-up gives: handed over after it.
	tail bool
}

// sender is one sender's share of a reader's queue: a room occupant (by
// nick), or the contact of a 1:1 chat ("").
type sender struct {
	q []queued
	// gap: the sender's messages past its share are not held but read
	// from the archive from first (its first one not held) on.
	gap   bool
	first string
	armed bool // the catch-up reached first: it takes this sender's messages
	// tail: out of its gap, its messages are held again; the catch-up
	// reads to the archive's end once more for those that came meanwhile.
	tail bool
}

// queue is one reader's messages of its conversation: the session's
// handler adds what the stream brings (add, never blocking it), the
// reader takes them round robin by sender (next), and catches up from
// the archive (scan) what was not held.
type queue struct {
	wake chan struct{} // signalled at every add

	mu          sync.Mutex
	senders     map[string]*sender // with something held, in a gap or a tail
	ring        []string           // senders with messages held, in turn
	total       int
	fromArchive int    // of total, read from the archive
	last        string // archive ID of the newest message the stream brought
	// scan is the archive ID a catch-up reads after; scanning while
	// any sender is in a gap or a tail.
	scan      string
	scanning  bool
	noArchive bool            // the archive refused a catch-up: drop past the bounds
	dup       map[string]bool // archive IDs a tail's catch-up held: skip them from the stream
	seen      map[string]bool // archive IDs handed over from the stream during a tail
}

func newQueue() *queue {
	return &queue{wake: make(chan struct{}, 1), senders: map[string]*sender{}, dup: map[string]bool{}, seen: map[string]bool{}}
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// add holds a message from the stream; it reports false when it was
// dropped (over the bounds with no archive to read it from again).
func (q *queue) add(in incoming) bool {
	defer q.signal()
	q.mu.Lock()
	defer q.mu.Unlock()
	prev := q.last
	if in.arch != "" {
		q.last = in.arch
	}
	s := q.senders[in.from]
	if s != nil && s.gap {
		return true // the archive has it; the catch-up reads it
	}
	if (s != nil && len(s.q) >= occupantQueue) || q.total >= readerQueue {
		if in.arch == "" || prev == "" || q.noArchive || q.gaps() >= maxGapSenders {
			return false
		}
		if s == nil {
			s = &sender{}
			q.senders[in.from] = s
		}
		if s.tail {
			// Its held messages and this one come after the catch-up's
			// position: the archive has them, and the catch-up, reading on
			// from there, gives all of this sender's again.
			q.unhold(in.from, s)
			s.gap, s.armed, s.tail = true, true, false
			return true
		}
		s.gap, s.first, s.armed, s.tail = true, in.arch, false, false
		if !q.scanning {
			q.scan, q.scanning = prev, true
		}
		return true
	}
	if s == nil {
		s = &sender{}
		q.senders[in.from] = s
	}
	q.push(in.from, s, len(s.q), queued{in: in, tail: s.tail})
	return true
}

// push inserts m into s's queue at i.
func (q *queue) push(name string, s *sender, i int, m queued) {
	if len(s.q) == 0 {
		q.ring = append(q.ring, name)
	}
	s.q = append(s.q, queued{})
	copy(s.q[i+1:], s.q[i:])
	s.q[i] = m
	q.total++
	if m.archived {
		q.fromArchive++
	}
}

// unhold drops the stream's messages a sender in a tail holds since
// the tail began.
func (q *queue) unhold(name string, s *sender) {
	kept := s.q[:0]
	for _, m := range s.q {
		if m.tail {
			q.total--
		} else {
			kept = append(kept, m)
		}
	}
	s.q = kept
	if len(s.q) == 0 {
		q.ring = slices.DeleteFunc(q.ring, func(n string) bool { return n == name })
	}
}

// gaps counts the senders in a gap.
func (q *queue) gaps() int {
	n := 0
	for _, s := range q.senders {
		if s.gap {
			n++
		}
	}
	return n
}

// next takes the next message, one sender after another. A sender in a
// tail gives none of the stream's messages until the catch-up gave what
// came before them.
func (q *queue) next() (incoming, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for turns := len(q.ring); turns > 0 && len(q.ring) > 0; turns-- {
		name := q.ring[0]
		q.ring = q.ring[1:]
		s := q.senders[name]
		if s.tail && s.q[0].tail {
			q.ring = append(q.ring, name) // held until the tail ends
			continue
		}
		m := s.q[0]
		s.q = s.q[1:]
		q.total--
		if m.archived {
			q.fromArchive--
		}
		if len(s.q) > 0 {
			q.ring = append(q.ring, name)
		} else if !s.gap && !s.tail {
			delete(q.senders, name)
		}
		if !m.archived && m.in.arch != "" {
			if q.dup[m.in.arch] {
				delete(q.dup, m.in.arch)
				turns++ // the catch-up held it already: no turn spent
				continue
			}
			if q.tails() && len(q.seen) < maxTailSeen {
				q.seen[m.in.arch] = true
			}
		}
		return m.in, true
	}
	return incoming{}, false
}

// tails reports whether a sender is in a tail.
func (q *queue) tails() bool {
	for _, s := range q.senders {
		if s.tail {
			return true
		}
	}
	return false
}

// scanDue reports where a catch-up reads from, when one is due: a sender
// is in a gap or a tail, and what the last page gave was handed over (at
// most one page held on top of the queue's bound).
func (q *queue) scanDue() (after string, due bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.scanning {
		return "", false
	}
	if q.fromArchive > 0 {
		return "", false
	}
	return q.scan, true
}

// scanned takes a page of the archive after scan: the messages of senders
// in a gap (from their first on) or a tail are held. complete says the
// page reached the archive's end: senders in a gap it reached leave it
// for a tail (the stream's messages held again, and one more page for
// what came meanwhile); senders in a tail leave it. An empty last page
// ends the gaps it never reached (their first message is not in the
// archive after the scan, so it is not there at all): it returns how
// many such senders lost messages.
func (q *queue) scanned(page []incoming, complete bool) (lost int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, in := range page {
		q.scan = in.arch
		s := q.senders[in.from]
		if s == nil || (!s.gap && !s.tail) {
			continue
		}
		if s.gap && !s.armed {
			if in.arch != s.first {
				continue
			}
			s.armed = true
		}
		if in.skip {
			continue // the bot's own, a room's subject: moves the scan only
		}
		if s.tail {
			if q.seen[in.arch] {
				continue // handed over from the stream already
			}
			if len(q.dup) < maxTailSeen {
				q.dup[in.arch] = true
			}
		}
		// Before what the stream gave during the tail (newer), after
		// all else (older).
		i := 0
		for i < len(s.q) && !s.q[i].tail {
			i++
		}
		q.push(in.from, s, i, queued{in: in, archived: true})
	}
	if !complete {
		return 0
	}
	open := false
	for name, s := range q.senders {
		switch {
		case s.gap && !s.armed && len(page) == 0:
			s.gap = false
			lost++
		case s.tail:
			s.tail = false
			for i := range s.q {
				s.q[i].tail = false
			}
		case s.gap && s.armed:
			s.gap, s.tail, open = false, true, true
		case s.gap:
			open = true
		}
		if !s.gap && !s.tail && len(s.q) == 0 {
			delete(q.senders, name)
		}
	}
	q.scanning = open
	if !open {
		clear(q.seen)
		if len(q.dup) > maxTailSeen {
			clear(q.dup)
		}
	}
	return lost
}

// refused gives up the catch-up: the archive refused it. Messages of
// senders in a gap are lost; past the bounds, messages are dropped from
// now on. It returns how many senders lost messages.
func (q *queue) refused() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for name, s := range q.senders {
		if s.gap {
			n++
		}
		s.gap, s.tail = false, false
		if len(s.q) == 0 {
			delete(q.senders, name)
		}
	}
	q.scanning, q.noArchive = false, true
	return n
}
