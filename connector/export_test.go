package connector

import "time"

// SetNetNow replaces the wall clock h sets connection deadlines from.
// Call it before h serves.
func SetNetNow(h *Handler, now func() time.Time) { h.netNow = now }

// ShutdownBegun returns a channel closed once k's Shutdown (or Close)
// stops taking new work.
func ShutdownBegun(k *Connector) <-chan struct{} { return k.drain.stopped() }

// Closed reports whether k's first Close has returned.
func Closed(k *Connector) bool {
	select {
	case <-k.closing:
		return true
	default:
		return false
	}
}

// UploadSlotFloor is the upload slots each peer may always hold.
const UploadSlotFloor = uploadSlotFloor
