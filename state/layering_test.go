package state_test

import (
	"os/exec"
	"strings"
	"testing"
)

// aboveStores are the packages a store must not pull in: the kit, the
// data plane, and what only they need (the WebSocket library). A store that imports one of them drags the whole kit into a
// program that wants only to keep state.
var aboveStores = []string{
	"github.com/xagentkit/imv2/connector",
	"github.com/xagentkit/imv2/dataplane",
	"github.com/xagentkit/imv2/connector/internal/display",
	"github.com/gorilla/websocket",
}

// TestLayering_StoresBelowTheKit lists the packages state, storetest,
// boltstore and pgstore (a module of its own) are built from, and fails
// when one of them reaches the kit or the data plane.
func TestLayering_StoresBelowTheKit(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the dependencies: %v", err)
	}
	for _, c := range []struct{ dir, pkg string }{
		{"..", "./state"}, {"..", "./storetest"}, {"..", "./boltstore"}, {"../pgstore", "."},
	} {
		cmd := exec.Command(goBin, "list", "-deps", c.pkg)
		cmd.Dir = c.dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s in %s: %v", c.pkg, c.dir, err)
		}
		deps := strings.Fields(string(out))
		for _, bad := range aboveStores {
			for _, d := range deps {
				if d == bad {
					t.Errorf("%s (in %s) depends on %s", c.pkg, c.dir, bad)
				}
			}
		}
	}
}
