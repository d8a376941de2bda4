package boltstore_test

import (
	"testing"

	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/storetest"
)

func TestStore_S8_W6_BindingContract(t *testing.T) {
	o := newOpener()
	storetest.TestBindingStore(t, func(t *testing.T) state.BindingStore {
		return o.open(t, tempPath(t), boltstore.Options{})
	}, func(t *testing.T, s state.BindingStore) state.BindingStore {
		return o.reopen(t, s.(*boltstore.Store))
	})
}

func TestStore_W6_BindingCap(t *testing.T) {
	o := newOpener()
	storetest.TestBindingCap(t, func(t *testing.T, capacity int) state.BindingStore {
		return o.open(t, tempPath(t), boltstore.Options{BindingCap: capacity})
	})
}
