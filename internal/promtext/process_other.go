//go:build !linux

package promtext

// RegisterProcess registers nothing off Linux: the process series are
// read from /proc.
func (r *Registry) RegisterProcess() {}
