// Package soak holds the reliability soak test of the SDK: a Connector
// (dataplane.Server on a boltstore) and an xAgent (dataplane.Client with
// imv2 Channels) talking through internal/faultproxy, which drops,
// duplicates, delays and reorders frames, cuts connections and holds them
// half-open, while the Connector is restarted on its durable store.
//
// The package has no API; see soak_test.go and RELIABILITY.md at the
// module root. The CI run is small (go test ./internal/soak); the
// full-size run is
//
//	go test -race -run TestSoak -timeout 60m ./internal/soak -v \
//	    -soak.messages 10000 -soak.replies 1000 -soak.deltas 50 \
//	    -soak.restarts 5 -soak.pendingcap 1000 -soak.timeout 50m \
//	    -soak.dir /dev/shm
package soak
