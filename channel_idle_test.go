package imv2

import (
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/xagentkit/imv2/clock"
)

// The Channel struct stays in the 576-byte size class: one byte more costs
// every idle channel the next class, 640 B (BenchmarkIdleChannels in
// dataplane, whose goal is 2 KiB per channel with both ends and the data
// plane's entries). Fields used by few channels go behind a pointer made on
// first use, as the activity state and the delta streams' maps do.
func TestChannel_StructFitsIts576ByteSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Channel{}); n > 576 {
		t.Errorf("Channel is %d B, over the 576-byte size class", n)
	}
}

// An idle Channel on shared stores, with a connector_id and a
// ClaimStore, holds its struct and its context and nothing made for
// messages it never had (no claim owner, no activity state, no maps):
// 720 B live after a GC, of which the struct is 576, context.WithCancel
// 96 and the connector_id 32; a claim owner made up front would add 48.
func TestChannel_IdleChannelHoldsUnder744Bytes(t *testing.T) {
	const n = 4000
	o := &Options{
		Clock:       clock.System{},
		Pending:     NewMemoryPendingStore(DefaultPendingCap),
		Completed:   NewMemoryCompletedStore(0, 0, clock.System{}),
		ConnectorID: "conn_0123456789abcdef0123456789abcdef",
	}
	if _, ok := o.Completed.(ClaimStore); !ok {
		t.Fatal("the memory completed store is no ClaimStore: the test misses the claim owner")
	}
	neg := imNegotiated()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "cch_" + strconv.Itoa(1_000_000+i)
	}
	chans := make([]*Channel, n)
	before := liveHeap()
	for i := range chans {
		c, err := NewChannel(ids[i], RoleConnector, neg, nil, newRecTarget(), o)
		if err != nil {
			t.Fatal(err)
		}
		chans[i] = c
	}
	after := liveHeap()
	per := (int64(after) - int64(before)) / n
	// The recTarget each channel has costs what it costs; subtract it.
	targets := make([]Target, n)
	tb := liveHeap()
	for i := range targets {
		targets[i] = newRecTarget()
	}
	per -= (int64(liveHeap()) - int64(tb)) / n
	runtime.KeepAlive(targets)
	for _, c := range chans {
		c.Close()
	}
	t.Logf("%d B per idle Channel", per)
	if per > 744 {
		t.Errorf("an idle Channel holds %d B, over 744", per)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
