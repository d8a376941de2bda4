package imv2_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// logAttrNames are the attribute names the SDK's log lines may use: one
// per concept, the wire's name where the wire has one (connector_channel_id,
// never "channel"; connector_id and old_connector_id, never "old"/"new"),
// so an operator filters every line about one channel with one key. A new
// concept is added here; a new name for an old one is not.
var logAttrNames = []string{
	"attempt", "attempts", "bytes", "channels", "code", "connector", "connector_channel_id",
	"connector_id", "cut", "delay", "err", "file_ref", "grace", "in", "max", "message_id", "method",
	"old_connector_channel_id", "old_connector_id", "path", "profile", "reason", "remote",
	"reply_to", "state", "status", "tool_id", "tries", "type", "unreachable", "xagent",
}

// logMethods maps a slog.Logger method to the index of its first
// attribute argument.
var logMethods = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2, "Log": 3,
}

// TestLogAttrs_OneNamePerConcept reads the log calls of the root package,
// connector and dataplane (and their internal packages) and fails on an
// attribute key not in logAttrNames.
func TestLogAttrs_OneNamePerConcept(t *testing.T) {
	fset := token.NewFileSet()
	seen := 0
	for _, root := range []string{".", "connector", "dataplane"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != root && (root == "." || d.Name() == "testdata") {
					return filepath.SkipDir // "." is the root package alone
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				first, ok := logMethods[sel.Sel.Name]
				if !ok || !isLogger(sel.X) {
					return true
				}
				for i := first; i < len(call.Args); i += 2 {
					lit, ok := call.Args[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						break // an slog.Attr or a spread list: not a key literal
					}
					key, _ := strconv.Unquote(lit.Value)
					seen++
					if !slices.Contains(logAttrNames, key) {
						t.Errorf("%s: log attribute %q: use the name logAttrNames has for its concept", fset.Position(lit.Pos()), key)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if seen < 50 {
		t.Fatalf("read only %d attribute keys; the scan missed the log calls", seen)
	}
}

// isLogger reports whether x names a logger by the SDK's conventions:
// a field or variable log, logger or Logger.
func isLogger(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name == "log" || x.Name == "logger"
	case *ast.SelectorExpr:
		return x.Sel.Name == "log" || x.Sel.Name == "logger" || x.Sel.Name == "Logger"
	}
	return false
}
