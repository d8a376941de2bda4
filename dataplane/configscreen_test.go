package dataplane

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestClientConfig_OneScreen: ClientConfig shows an agent at most ten
// settings, the rest grouped in ClientAdvanced; every setting's doc
// states its default (or that it is required); and no field's type comes
// from a package outside the standard library and this module (issue 36).
func TestClientConfig_OneScreen(t *testing.T) {
	src, err := os.ReadFile("client.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range configProblems(string(src)) {
		t.Error(p)
	}
}

// TestClientConfig_ProblemsAreReported: the check fails on an eleventh
// first-screen setting, a setting whose doc states no default and a
// third-party type.
func TestClientConfig_ProblemsAreReported(t *testing.T) {
	var eleven strings.Builder
	eleven.WriteString("package dataplane\n\ntype ClientConfig struct {\n")
	for _, f := range strings.Fields("A B C D E F G H I J K") {
		eleven.WriteString("\t// " + f + " is required.\n\t" + f + " int\n")
	}
	eleven.WriteString("}\n\ntype ClientAdvanced struct{}\n")
	for name, bad := range map[string]string{
		"eleven settings": eleven.String(),
		"no default": "package dataplane\n\ntype ClientConfig struct {\n\t// Advanced groups.\n\tAdvanced ClientAdvanced\n}\n\n" +
			"type ClientAdvanced struct {\n\t// Dialer dials.\n\tDialer int\n}\n",
		"third-party type": "package dataplane\n\nimport \"github.com/gorilla/websocket\"\n\n" +
			"type ClientConfig struct {\n\t// Dialer dials; default none.\n\tDialer *websocket.Dialer\n}\n\ntype ClientAdvanced struct{}\n",
	} {
		if len(configProblems(bad)) == 0 {
			t.Errorf("a config with %s passed", name)
		}
	}
}

// statesDefault is what a setting's doc says when it has a default.
var statesDefault = regexp.MustCompile(`(?i)\bdefault|\brequired\b`)

// configProblems returns what breaks the rules above in the source of
// client.go.
func configProblems(src string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "client.go", src, parser.ParseComments)
	if err != nil {
		return []string{err.Error()}
	}
	imports := map[string]string{} // local name → path
	for _, im := range f.Imports {
		path := strings.Trim(im.Path.Value, `"`)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = path
	}
	var problems []string
	structs := map[string]*ast.StructType{}
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if st, ok := ts.Type.(*ast.StructType); ok {
				structs[ts.Name.Name] = st
			}
		}
		return true
	})
	for _, name := range []string{"ClientConfig", "ClientAdvanced"} {
		st := structs[name]
		if st == nil {
			problems = append(problems, name+" is missing")
			continue
		}
		n := 0
		for _, fl := range st.Fields.List {
			n += max(len(fl.Names), 1)
			names := fieldNames(fl)
			if !statesDefault.MatchString(fl.Doc.Text()) && names != "Advanced" {
				problems = append(problems, name+"."+names+": its doc states no default")
			}
			ast.Inspect(fl.Type, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok {
						path := imports[x.Name]
						if first := strings.Split(path, "/")[0]; strings.Contains(first, ".") && !strings.HasPrefix(path, "github.com/xagentkit/imv2") {
							problems = append(problems, name+"."+names+": third-party type "+path+"."+sel.Sel.Name)
						}
					}
				}
				return true
			})
		}
		if name == "ClientConfig" && n > 10 {
			problems = append(problems, "ClientConfig has more than ten first-screen settings")
		}
	}
	return problems
}

func fieldNames(fl *ast.Field) string {
	var s []string
	for _, n := range fl.Names {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}
