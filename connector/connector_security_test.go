package connector_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSecurity_W1_T3_SecretsComparedInConstantTime reads the functions that
// compare secrets (the API key, checked by one function for the HTTP side and the
// data plane, and the download URL signature) and checks that each compares with
// crypto/subtle or crypto/hmac and never with == or != on a secret. Timing
// cannot be measured reliably in a unit test; the code path can.
func TestSecurity_W1_T3_SecretsComparedInConstantTime(t *testing.T) {
	for _, c := range []struct {
		file, fn, want string
	}{
		{"../internal/apikey/apikey.go", "Allow", "subtle.ConstantTimeCompare"}, // the HTTP side and the data plane
		{"signedurl.go", "verify", "hmac.Equal"},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, c.file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var body *ast.BlockStmt
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == c.fn {
				body = fd.Body
			}
		}
		if body == nil {
			t.Fatalf("%s: func %s not found; update this test with the code", c.file, c.fn)
		}
		calls := map[string]bool{}
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok {
						calls[x.Name+"."+sel.Sel.Name] = true
					}
				}
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && !safeOperand(n.X) && !safeOperand(n.Y) && (secretish(n.X) || secretish(n.Y)) {
					t.Errorf("%s: %s compares a secret with %s", fset.Position(n.Pos()), c.fn, n.Op)
				}
			}
			return true
		})
		if !calls[c.want] {
			t.Errorf("%s: %s does not call %s", c.file, c.fn, c.want)
		}
		for _, bad := range []string{"bytes.Equal", "reflect.DeepEqual", "strings.Compare"} {
			if calls[bad] {
				t.Errorf("%s: %s calls %s", c.file, c.fn, bad)
			}
		}
	}
}

// safeOperand reports whether e makes the comparison harmless: a length
// (public, fixed for digests and signatures) or the result of a
// constant-time compare.
func safeOperand(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name == "len"
	case *ast.SelectorExpr:
		x, ok := fn.X.(*ast.Ident)
		return ok && (x.Name == "subtle" || x.Name == "hmac")
	}
	return false
}

// secretish reports whether e names a secret (a key, digest, token or
// signature) rather than a length or a constant.
func secretish(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			name := strings.ToLower(id.Name)
			for _, s := range []string{"key", "digest", "token", "sig", "mac", "got"} {
				if strings.Contains(name, s) {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// TestSecurity_T3_FileRefAndURLEntropy: a file_ref carries 128 random bits
// (32 hex digits after the prefix) and every one of those bits varies
// across refs, which catches a counter, a timestamp or a constant; a
// download URL's signature is a full 256-bit HMAC, and two URLs for the
// same file differ only where their expiry differs.
func TestSecurity_T3_FileRefAndURLEntropy(t *testing.T) {
	e := newEnv(t, nil)
	var ones, zeros [128]int
	for i := 0; i < 64; i++ {
		f, err := e.h.OfferFile(context.Background(), "cch_1", "a.txt", "text/plain", strings.NewReader("same"))
		require.NoError(t, err)
		hexPart, ok := strings.CutPrefix(f.FileRef, "file_")
		require.True(t, ok, f.FileRef)
		raw, err := hex.DecodeString(hexPart)
		require.NoError(t, err)
		require.Len(t, raw, 16, "128 bits")
		for bit := range 128 {
			if raw[bit/8]>>(bit%8)&1 == 1 {
				ones[bit]++
			} else {
				zeros[bit]++
			}
		}
		u, err := url.Parse(f.DownloadURL)
		require.NoError(t, err)
		sig, err := base64.RawURLEncoding.DecodeString(u.Query().Get("sig"))
		require.NoError(t, err)
		require.Len(t, sig, 32, "HMAC-SHA256")
		require.Equal(t, "cch_1", u.Query().Get("ch"), "bound to its channel")
		require.NotEmpty(t, u.Query().Get("exp"), "expiring")
	}
	for bit := range 128 {
		// With 64 random refs a fixed bit has probability 2^-63.
		require.True(t, ones[bit] > 0 && zeros[bit] > 0, "bit %d of file_ref never changes", bit)
	}
}
