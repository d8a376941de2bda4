package imv2test

import (
	"fmt"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
)

// Resending finals after a retryable rejection. When the suite plays
// xAgent it does what xAgent does with a final the Connector rejected with
// retryable=true (A7, A8): it sends the same message again, same
// message_id and content under a new packet_id, after an exponential
// backoff, until the Connector answers for good or the bound is spent.
// The script never sees the retryable rejections of a final that was
// resent: its expect gets the terminal answer (accepted, duplicate, a
// permanent rejection), or the last retryable rejection when the resends
// ran out, so a correct rate-limited Connector passes and one that never
// accepts still fails. An ack answering a resend counts as answering the
// script's packet (an xAgent correlates any of its transmissions, A1).

// Defaults of the Config resend bounds.
const (
	DefaultRetryAttempts = 8
	DefaultRetryMin      = 100 * time.Millisecond
)

// maxTrackedFinals bounds the transmissions (a script's final or a
// resend of it) one connection remembers; beyond it a final is sent but
// not resent (a check sends a few dozen, a flood is not resent). A final's
// entries go on its terminal answer, so only finals still unanswered or
// being resent hold the map.
const maxTrackedFinals = 10_000

// resender is the resend state of one connection.
type resender struct {
	attempts int
	min, max time.Duration // max 0: no cap
	budget   time.Duration
	logf     func(format string, args ...any)

	mu     sync.Mutex
	finals map[string]*final // by the packet_id of every transmission
	timers map[*time.Timer]bool
	closed bool
	wg     sync.WaitGroup // running resend callbacks
}

// final is one chat.message the script sent.
type final struct {
	pkt     imv2.Packet // the script's packet, the template of resends
	orig    string      // its packet_id, the one the script names
	ids     []string    // every transmission's packet_id, orig first: its keys in finals
	first   time.Time   // the first retryable rejection
	resends int
	waiting bool // a resend is scheduled
}

func newResender(cfg *Config, logf func(string, ...any)) *resender {
	return &resender{
		attempts: cfg.RetryAttempts,
		min:      cfg.RetryMin,
		max:      cfg.RetryMax,
		budget:   cfg.RetryBudget,
		logf:     logf,
		finals:   map[string]*final{},
		timers:   map[*time.Timer]bool{},
	}
}

// track remembers a chat.message the script sent, to resend it.
func (rs *resender) track(p *imv2.Packet) {
	if p.Type != imv2.TypeChatMessage {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.finals) >= maxTrackedFinals {
		return
	}
	rs.finals[p.PacketID] = &final{pkt: *p, orig: p.PacketID, ids: []string{p.PacketID}}
}

// forgetLocked removes every transmission of f: its answer was terminal
// (the script already has its origin, looked up before onAck).
func (rs *resender) forgetLocked(f *final) {
	for _, id := range f.ids {
		if rs.finals[id] == f {
			delete(rs.finals, id)
		}
	}
	f.ids = nil
}

// origin returns the script's packet_id behind a transmission's, or "".
func (rs *resender) origin(packetID string) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if f := rs.finals[packetID]; f != nil && f.orig != packetID {
		return f.orig
	}
	return ""
}

// pending describes the finals waiting for a resend, for a timeout's
// reason ("" when none).
func (rs *resender) pending() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	seen := map[*final]bool{}
	for _, f := range rs.finals {
		if f.waiting && !seen[f] {
			seen[f] = true
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d final(s) rejected retryable, being resent", n)
}

// onAck looks at an ack fr received for a tracked final. It returns true
// when it holds fr back from the script and resends the final after a
// backoff; send transmits the resend and release hands fr to the script
// when the resend cannot go out.
func (rs *resender) onAck(fr *frame, send func(*imv2.Packet) error, release func(*frame)) bool {
	status, _ := walk(fr.doc, "payload.status")
	retry, _ := walk(fr.doc, "payload.retryable")
	code, _ := walk(fr.doc, "payload.code")
	mid, _ := walk(fr.doc, "payload.message_id")
	rs.mu.Lock()
	defer rs.mu.Unlock()
	f := rs.finals[fr.p.ReplyTo]
	line := fmt.Sprintf("    ack message_id=%v status=%v", mid, status)
	if status == string(imv2.AckRejected) {
		line += fmt.Sprintf(" code=%v retryable=%v", code, retry)
	}
	if f == nil || rs.closed {
		rs.logf("%s", line)
		return false
	}
	if status != string(imv2.AckRejected) || retry != true {
		rs.logf("%s", line)
		rs.forgetLocked(f) // accepted, duplicate or rejected for good
		return false
	}
	now := time.Now()
	if f.resends == 0 {
		f.first = now
	}
	delay := rs.min << min(f.resends, 20)
	if rs.max > 0 {
		delay = min(delay, rs.max)
	}
	if f.resends >= rs.attempts || now.Add(delay).Sub(f.first) > rs.budget {
		rs.logf("%s: gave up after %d resend(s) in %v", line, f.resends, now.Sub(f.first).Round(time.Millisecond))
		rs.forgetLocked(f)
		return false
	}
	if len(rs.finals) >= maxTrackedFinals {
		// A resend is one more entry: it counts against the cap.
		rs.logf("%s: not resent, %d transmissions tracked", line, len(rs.finals))
		rs.forgetLocked(f)
		return false
	}
	// The resend's packet_id is taken now, so the cap counts it while it
	// waits for its backoff.
	resendID := imv2.NewPacketID()
	rs.finals[resendID] = f
	f.ids = append(f.ids, resendID)
	f.resends++
	f.waiting = true
	rs.logf("%s: resend %d in %v", line, f.resends, delay)
	var t *time.Timer
	rs.wg.Add(1)
	t = time.AfterFunc(delay, func() {
		defer rs.wg.Done()
		rs.mu.Lock()
		delete(rs.timers, t)
		f.waiting = false
		if rs.closed {
			rs.mu.Unlock()
			return
		}
		p := f.pkt
		p.PacketID = resendID
		p.Time = time.Now().UnixMilli()
		rs.mu.Unlock()
		if err := send(&p); err != nil {
			rs.logf("    resend of message_id=%v failed: %v", mid, err)
			release(fr)
		}
	})
	rs.timers[t] = true
	return true
}

// close stops every scheduled resend and waits for a running one.
func (rs *resender) close() {
	rs.mu.Lock()
	rs.closed = true
	for t := range rs.timers {
		if t.Stop() {
			rs.wg.Done()
		}
	}
	clear(rs.timers)
	rs.mu.Unlock()
	rs.wg.Wait()
}
