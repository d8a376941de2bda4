package dataplane

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"go.uber.org/goleak"
)

// doneChannelGoroutines are the goroutines tracked by a channel they close
// on return, which Close waits for, instead of a WaitGroup.
var doneChannelGoroutines = map[string]bool{
	"c.reader": true, // closes readerDone (conn.go)
	"c.writer": true, // closes writerDone (connwrite.go)
}

// TestDataplane_EveryGoroutineIsTracked: every go statement of the
// package's code is tracked, so Close can wait for it: a function literal
// starts with `defer <WaitGroup>.Done()`, a method call follows its
// `<WaitGroup>.Add(1)`, or it closes a done channel Close waits on. An
// untracked `go func() { _ = ch.Close() }()` may outlive Server.Close.
func TestDataplane_EveryGoroutineIsTracked(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var untracked []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			block, ok := n.(*ast.BlockStmt)
			if !ok {
				return true
			}
			for i, st := range block.List {
				g, ok := st.(*ast.GoStmt)
				if !ok {
					continue
				}
				if !tracked(g, block.List[:i]) {
					untracked = append(untracked, fset.Position(g.Pos()).String())
				}
			}
			return true
		})
	}
	require.Empty(t, untracked, "go statements no WaitGroup or done channel tracks")
}

// tracked reports whether g is tracked: see TestDataplane_EveryGoroutineIsTracked.
func tracked(g *ast.GoStmt, before []ast.Stmt) bool {
	if lit, ok := g.Call.Fun.(*ast.FuncLit); ok {
		if len(lit.Body.List) == 0 {
			return false
		}
		d, ok := lit.Body.List[0].(*ast.DeferStmt)
		return ok && isMethodCall(d.Call, "Done")
	}
	if sel, ok := g.Call.Fun.(*ast.SelectorExpr); ok {
		if x, ok := sel.X.(*ast.Ident); ok && doneChannelGoroutines[x.Name+"."+sel.Sel.Name] {
			return true
		}
	}
	if len(before) == 0 {
		return false
	}
	e, ok := before[len(before)-1].(*ast.ExprStmt)
	if !ok {
		return false
	}
	c, ok := e.X.(*ast.CallExpr)
	return ok && isMethodCall(c, "Add")
}

func isMethodCall(c *ast.CallExpr, name string) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name
}

// TestServer_W5_StaleKnownIsItsOwnError: the retry of a reopen that raced
// a drop matches its own cause under errors.Is, not the other
// connector_channel_unavailable refusals, and still travels with that
// code and its message.
func TestServer_W5_StaleKnownIsItsOwnError(t *testing.T) {
	stale := staleKnown()
	require.ErrorIs(t, stale, errStaleKnown)
	require.ErrorIs(t, stale, &imv2.Error{Code: imv2.CodeChannelUnavailable})
	e := imv2.AsError(stale, imv2.CodeInvalidPacket)
	require.Equal(t, imv2.CodeChannelUnavailable, e.Code)
	require.Equal(t, "channels were dropped while this channel.open ran; try again", e.Message)

	full := imv2.Errorf(imv2.CodeChannelUnavailable, "connector_id %q has %d open channels, the limit", "c", 1)
	require.NotErrorIs(t, full, errStaleKnown, "another refusal with the same code")
}

// TestServer_W5_ReopenRaceLeavesNoGoroutine: the Channel made for a
// reopen that raced a drop is thrown away and made again; after
// Server.Close no goroutine of it is left (goleak).
func TestServer_W5_ReopenRaceLeavesNoGoroutine(t *testing.T) {
	clk := fakeclock.New(t0)
	reg := &knownGate{id: "cch_old", entered: make(chan struct{}), hold: make(chan struct{})}
	setFrom(&reg.MemoryRegistry, defaultRegistry(t))
	require.NoError(t, reg.Register(context.Background(), "cch_old"))
	srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }, Clock: clk, Registry: reg})
	require.NoError(t, err)
	release := sync.OnceFunc(func() { close(reg.hold) })
	defer release()

	other, done := pipeSession(t, srv)
	other.hello("")
	other.open("")
	require.NoError(t, other.c.Close())
	<-done

	p, _ := pipeSession(t, srv)
	p.hello("")
	reopened := make(chan string, 1)
	go func() { reopened <- p.open("cch_old") }()
	recv(t, reg.entered)
	clk.Advance(DefaultOfflineGrace)
	release()
	require.Equal(t, "cch_old", recv(t, reopened))
	require.NoError(t, srv.Close())
	require.NoError(t, p.c.Close())
	goleak.VerifyNone(t)
	reg.mu.Lock()
	defer reg.mu.Unlock()
	require.Equal(t, 2, reg.calls, "the reopen raced the drop: a Channel was thrown away")
}

// defaultRegistry returns the Registry a Server makes when given none,
// without naming its package.
func defaultRegistry(t *testing.T) any {
	srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }})
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	return srv.cfg.Registry
}

// setFrom stores v, which must be a T, in *dst.
func setFrom[T any](dst *T, v any) { *dst = v.(T) }
