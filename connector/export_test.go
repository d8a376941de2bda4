package connector

import "time"

// SetNetNow replaces the wall clock h sets connection deadlines from.
// Call it before h serves.
func SetNetNow(h *Handler, now func() time.Time) { h.netNow = now }
