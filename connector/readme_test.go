package connector_test

import (
	"fmt"
	"go/format"
	"os"
	"strings"
	"testing"
)

// TestReadme_ExampleIsTheRealThing: the README's "A whole Connector" code
// is example_kit_test.go to the byte, so the code readers copy is the one
// go test compiles and runs; it is gofmt'd and no line is over 100
// columns.
func TestReadme_ExampleIsTheRealThing(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_kit_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := readmeMatches(string(readme), string(example)); err != "" {
		t.Fatal(err)
	}
}

// TestReadme_MismatchIsReported: the check fails on a README that
// drifted, on an example gofmt would change and on a line over 100
// columns.
func TestReadme_MismatchIsReported(t *testing.T) {
	example := "package connector_test\n\nfunc Example() {}\n"
	if readmeMatches("```go\npackage connector_test\n\nfunc Example() { /* edited */ }\n```\n", example) == "" {
		t.Error("a drifted README passed")
	}
	for name, bad := range map[string]string{
		"not gofmt'd": "package connector_test\n\nfunc  Example() {}\n",
		"wide":        "package connector_test\n\n// " + strings.Repeat("x", 98) + "\n",
	} {
		if readmeMatches("```go\n"+bad+"```\n", bad) == "" {
			t.Errorf("a %s example passed", name)
		}
	}
}

func readmeMatches(readme, example string) string {
	const open = "```go\npackage connector_test\n"
	i := strings.Index(readme, open)
	if i < 0 {
		return "README.md has no ```go block starting with package connector_test"
	}
	block := readme[i+len("```go\n"):]
	j := strings.Index(block, "```")
	if j < 0 {
		return "README.md's example block is not closed"
	}
	if block[:j] != example {
		return "README.md's example differs from connector/example_kit_test.go: copy the file into the README"
	}
	if formatted, err := format.Source([]byte(example)); err != nil || string(formatted) != example {
		return "connector/example_kit_test.go is not gofmt'd"
	}
	for i, line := range strings.Split(example, "\n") {
		// A tab counts four columns, as the README renders it.
		if len([]rune(strings.ReplaceAll(line, "\t", "    "))) > 100 {
			return fmt.Sprintf("the README example's line %d is over 100 columns", i+1)
		}
	}
	return ""
}
