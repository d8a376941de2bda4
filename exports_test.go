package imv2_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxRootExports bounds the root package's exported identifiers. The root
// is the IM Profile v2 a Connector author reads: the envelope, the four
// payloads, errors, the catalog, the Channel and its stores. The Common
// Protocol control plane lives in package protocol and the SDK's own helpers
// in internal/ or unexported, so a new exported name here should replace an
// old one. Raise the bound only with a reason in the commit.
const maxRootExports = 186

// rootExports lists the exported identifiers of the package in dir the way
// the bound counts them: top-level funcs, methods on exported types,
// exported types, and each exported const and var name (struct fields and
// interface methods are not counted).
func rootExports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			names = append(names, declExports(d)...)
		}
	}
	sort.Strings(names)
	return names
}

func declExports(d ast.Decl) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			break
		}
		if d.Recv == nil {
			return []string{d.Name.Name}
		}
		if recv := recvType(d.Recv.List[0].Type); ast.IsExported(recv) {
			return []string{recv + "." + d.Name.Name}
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names = append(names, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// recvType is the type name of a method receiver: T, *T, T[P] or *T[P].
func recvType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func TestExports_RootStaysSmall(t *testing.T) {
	names := rootExports(t, ".")
	if len(names) > maxRootExports {
		t.Fatalf("the root exports %d identifiers, over the bound %d; move Common Protocol names to package protocol and SDK-only helpers to internal/ or unexport them:\n%s",
			len(names), maxRootExports, strings.Join(names, "\n"))
	}
	t.Logf("the root exports %d identifiers (bound %d)", len(names), maxRootExports)
}

// The counter itself counts each kind of declaration once and skips the
// unexported ones: a counter that always returned few names would let the
// bound pass forever.
func TestExports_CounterCountsEachKind(t *testing.T) {
	dir := t.TempDir()
	src := `package p

type T struct{ Field int }
type u struct{}
type G[P any] struct{}

func F()           {}
func f()           {}
func (T) M()       {}
func (*T) N()      {}
func (u) M()       {}
func (G[P]) M()    {}
func (T) m()       {}

const A, b, C = 1, 2, 3
var V, w = 1, 2
`
	if err := os.WriteFile(dir+"/p.go", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/p_test.go", []byte("package p\n\nfunc Exported() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rootExports(t, dir), " ")
	const want = "A C F G G.M T T.M T.N V"
	if got != want {
		t.Fatalf("counted %q, want %q", got, want)
	}
}
