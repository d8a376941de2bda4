// Package answered lets a Channel's Observer learn that an inbound
// message's acks have been handed to its Transport, without a root
// export: the kit's Shutdown waits for it, so the close frame never
// overtakes the ack of a final it let finish. Observer events come
// before the ack (EventDelivered follows the completed record), so none
// of them can say this.
package answered

// Observer is implemented by an imv2.Observer that wants to know when
// the acks of a delivered (or refused) inbound message were handed to
// the Transport: written, or accepted in order before any later frame
// (and so before a close frame). The Channel calls Answered once per
// Target delivery, after the ack of every copy, on the delivering
// goroutine; keep it fast.
type Observer interface {
	Answered(channelID, messageID string)
}
