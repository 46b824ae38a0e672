package api

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

var update = flag.Bool("update", false, "rewrite golden files")

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }

// Every field of every type in the table is listed: a k8s.io/api upgrade that
// adds a field fails here, so someone decides (and documents) what it means.
func TestFieldTablesCoverTypes(t *testing.T) {
	for typ, table := range FieldTables {
		seen := map[string]bool{}
		for _, f := range jsonFields(typ) {
			seen[f.Name] = true
			if _, ok := table[f.Name]; !ok {
				t.Errorf("%s.%s is missing from the field table (it is rejected until listed)", typ.Name(), f.Name)
			}
		}
		for name := range table {
			if !seen[name] {
				t.Errorf("%s.%s is in the field table but not in the type", typ.Name(), name)
			}
		}
	}
}

// docs/pod-fields.md is generated from the table (go test ./pkg/api -update).
func TestFieldTableDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "pod-fields.md")
	want := "# Pod fields\n\nWhat the agent does with each field of a Pod manifest: **implemented** fields are honoured,\n" +
		"**ignored** ones are accepted and logged once, **rejected** ones make the manifest invalid (with an\n" +
		"error naming the field). Generated from `pkg/api/fields.go` by `go test ./pkg/api -update`.\n" +
		FieldTableMarkdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with go test ./pkg/api -update)", err)
	}
	if string(got) != want {
		t.Errorf("%s is out of date with pkg/api/fields.go: run go test ./pkg/api -update", path)
	}
	if !strings.Contains(want, "| `hostUsers` | rejected |") {
		t.Errorf("rendered table lacks a known row")
	}
}
