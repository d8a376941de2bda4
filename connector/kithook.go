package connector

import (
	"sync/atomic"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/kithook"
)

// watch is the hook imv2test attaches through internal/kithook to see
// every platform call the kit made that succeeded, so a kit Connector's
// author records nothing for the conformance suite. It is no option: a
// Connector in production never has one.
type watch struct {
	f     atomic.Pointer[func(kithook.Call)]
	built kithook.Kit
}

func init() {
	kithook.Watch = func(k any, f func(kithook.Call)) bool {
		c, ok := k.(*Connector)
		if ok {
			if f == nil {
				c.watch.f.Store(nil)
			} else {
				c.watch.f.Store(&f)
			}
		}
		return ok
	}
	kithook.Describe = func(k any) (kithook.Kit, bool) {
		c, ok := k.(*Connector)
		if !ok {
			return kithook.Kit{}, false
		}
		return c.watch.built, true
	}
}

// builtWith is what o tells a conformance run: the API key and the
// declared bounds (zero: the default).
func builtWith(o *Options, p Platform) kithook.Kit {
	_, typing := p.(Typer)
	_, listener := p.(Listener)
	b := kithook.Kit{APIKey: o.APIKey, Typing: typing, Platform: p, Listener: listener}
	if ch := o.Advanced.Channel; ch != nil {
		b.DeltaIdleTTL, b.DeltaSweep, b.ActivityTimeout = ch.DeltaIdleTTL, ch.DeltaSweep, ch.ActivityTimeout
	}
	return b
}

// saw reports a platform call that succeeded to the attached watcher.
func (w *watch) saw(c kithook.Call) {
	if f := w.f.Load(); f != nil {
		(*f)(c)
	}
}

// sawFinal reports a final shown.
func (w *watch) sawFinal(channelID string, m *imv2.ChatMessage) {
	if w.f.Load() != nil {
		w.saw(kithook.Call{Op: "final", ChannelID: channelID, MessageID: m.MessageID, Text: m.Text, Files: m.Files})
	}
}
