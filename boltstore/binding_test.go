package boltstore_test

import (
	"testing"

	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/storetest"
)

func TestStore_S8_W6_BindingContract(t *testing.T) {
	o := newOpener()
	storetest.TestBindingStore(t, func(t *testing.T) connector.BindingStore {
		return o.open(t, tempPath(t), boltstore.Options{})
	}, func(t *testing.T, s connector.BindingStore) connector.BindingStore {
		return o.reopen(t, s.(*boltstore.Store))
	})
}

func TestStore_W6_BindingCap(t *testing.T) {
	o := newOpener()
	storetest.TestBindingCap(t, func(t *testing.T, capacity int) connector.BindingStore {
		return o.open(t, tempPath(t), boltstore.Options{BindingCap: capacity})
	})
}
