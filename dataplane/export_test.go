package dataplane

import "github.com/xagentkit/imv2"

// engine returns the imv2.Channel the Client holds under id itself (no
// replacement followed), or nil: the engine view (pending, stats, a
// bare Send) that tests inspect and the Client no longer hands out.
func (c *Client) engine(id string) *imv2.Channel {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.channels[id]; e != nil {
		return e.ch
	}
	return nil
}
