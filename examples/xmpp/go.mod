module github.com/xagentkit/imv2/examples/xmpp

go 1.26.0

require (
	github.com/stretchr/testify v1.12.1
	github.com/xagentkit/imv2 v0.0.0
	go.uber.org/goleak v1.3.0
	mellium.im/sasl v0.3.2
	mellium.im/xmlstream v0.15.4
	mellium.im/xmpp v0.22.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/go-json-experiment/json v1.27.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	go.etcd.io/bbolt v1.4.3 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
	mellium.im/reader v0.1.0 // indirect
)

// Development: build against the SDK in this repository.
replace github.com/xagentkit/imv2 => ../..
