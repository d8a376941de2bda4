package imv2

import (
	"context"

	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/port"
)

// activityState is a Connector channel's temporary status (C1, C5–C8):
// the newest snapshot wins, a local timeout clears it, and calls to the
// Target's SetActivity (port.ActivityTarget) run on one lane so a slow
// platform sees only the newest state. Guarded by Channel.mu; made by the
// first snapshot a Channel with a port.ActivityTarget receives
// (Channel.act), so a channel that never shows one holds none.
type activityState struct {
	shown   bool          // thinking or tool is displayed
	running bool          // a lane goroutine is calling the target
	want    *ChatActivity // newest state not yet handed to the target
	idle    chan struct{} // closed when the running lane stops
	timeout clock.Timer
}

// receiveActivity handles a chat.activity snapshot (C1–C4). It is never
// acked and never persisted.
func (c *Channel) receiveActivity(_ context.Context, p *Packet) error {
	a, err := DecodeChatActivity(p)
	if err != nil {
		e := AsError(err, CodeInvalidPacket)
		c.observe(Event{Kind: EventRejected, PacketType: p.Type, Code: e.Code})
		c.reply(NewErrorPacket(p, e))
		return e
	}
	if a.Status == ActivityIdle {
		c.clearActivity()
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.target.(port.ActivityTarget[ChatActivity]); !ok || c.closed { // C5: no status support, a no-op
		return nil
	}
	if c.act == nil {
		c.act = new(activityState)
	}
	c.act.shown = true
	stopTimer(&c.act.timeout)
	c.act.timeout = c.afterLocked(c.o.ActivityTimeout, c.clearActivity) // C7
	c.pushActivityLocked(*a)
	return nil
}

// clearActivity sets the status back to idle if one is shown (C6, C7).
func (c *Channel) clearActivity() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.act == nil || !c.act.shown || c.closed {
		return
	}
	c.act.shown = false
	stopTimer(&c.act.timeout)
	c.pushActivityLocked(ChatActivity{Status: ActivityIdle})
}

func (c *Channel) pushActivityLocked(a ChatActivity) {
	c.act.want = &a
	if c.act.running {
		return
	}
	c.act.running = true
	c.act.idle = make(chan struct{})
	c.spawnLocked(c.showActivity)
}

// settleActivity waits until the port.ActivityTarget has been handed the newest
// state, so a final is shown after the status it clears (C6).
func (c *Channel) settleActivity() {
	c.mu.Lock()
	if c.act == nil {
		c.mu.Unlock()
		return
	}
	idle := c.act.idle
	running := c.act.running
	c.mu.Unlock()
	if running {
		select {
		case <-idle:
		case <-c.ctx.Done():
		}
	}
}

// showActivity hands the newest state to the port.ActivityTarget. Its errors
// are logged and observed, and never touch a chat message (C8).
func (c *Channel) showActivity() {
	for {
		c.mu.Lock()
		a := c.act.want
		c.act.want = nil
		if a == nil || c.closed {
			c.act.running = false
			close(c.act.idle)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		tctx := c.targetCtx()
		if err := c.target.(port.ActivityTarget[ChatActivity]).SetActivity(tctx, c.id, *a); err != nil {
			c.observe(Event{Kind: EventActivityError})
			c.log.Debug("activity not shown", "status", a.Status, "err", err)
		}
		tctx.Release()
	}
}
