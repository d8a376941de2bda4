package matrixbridge

import (
	"errors"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// FuzzAccountOf: any binding Data decodes to an Account or to the
// permanent connection_not_authenticated refusal, never a panic, and an
// Account survives its own round trip.
func FuzzAccountOf(f *testing.F) {
	f.Add(Account{Homeserver: "https://hs", UserID: "@a:hs", AccessToken: "t", Since: "s1", OwnDevice: true}.Data())
	f.Add([]byte(`{"access_token":""}`))
	f.Add([]byte(`{torn`))
	f.Add([]byte(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		acc, err := AccountOf(data)
		if err != nil {
			if imv2.SafeToRetry(err) || !errors.Is(err, &imv2.Error{Code: protocol.CodeConnectionNotAuthenticated}) {
				t.Fatalf("AccountOf(%q) = %v; want a permanent connection_not_authenticated", data, err)
			}
			return
		}
		again, err := AccountOf(acc.Data())
		if err != nil || again != acc {
			t.Fatalf("round trip of %+v = %+v, %v", acc, again, err)
		}
	})
}
