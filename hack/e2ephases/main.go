// Command e2ephases prints, as a `go test -run` pattern, the top-level tests
// of a package's *_test.go files that begin with t.Parallel(): the tests
// that assert no time or cost of their own, which hack/test.sh runs beside
// the rest of the suite, while the tests that time or count what they run
// have the machine to themselves.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: e2ephases DIR")
		os.Exit(2)
	}
	names, err := sideBySide(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2ephases:", err)
		os.Exit(1)
	}
	if len(names) == 0 {
		fmt.Fprintf(os.Stderr, "e2ephases: no test in %s calls t.Parallel first\n", os.Args[1])
		os.Exit(1)
	}
	fmt.Printf("^(%s)$\n", strings.Join(names, "|"))
}

// sideBySide lists the Test functions of dir whose first statement is a
// call of their *testing.T's Parallel method.
func sideBySide(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain" && startsParallel(fn) {
				names = append(names, fn.Name.Name)
			}
		}
	}
	sort.Strings(names)
	return names, nil
}

// startsParallel says whether fn's body begins with <param>.Parallel().
func startsParallel(fn *ast.FuncDecl) bool {
	params := fn.Type.Params.List
	if fn.Body == nil || len(fn.Body.List) == 0 || len(params) != 1 || len(params[0].Names) != 1 {
		return false
	}
	stmt, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Parallel" {
		return false
	}
	recv, ok := sel.X.(*ast.Ident)
	return ok && recv.Name == params[0].Names[0].Name
}
