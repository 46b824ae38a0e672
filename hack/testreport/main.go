// Command testreport reads `go test -json` on stdin and keeps the console
// readable: it prints each package's result line and the whole output of
// every failed test, then the slowest tests, so a run shows where its time
// went. The raw stream goes to the file named by its one argument.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// event is one record of cmd/test2json.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ... | testreport LOG")
		os.Exit(2)
	}
	raw, err := os.Create(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer raw.Close()
	type key struct{ pkg, test string }
	output := map[key][]string{} // a running test's lines, printed if it fails
	type timing struct {
		name    string
		elapsed float64
	}
	var slowest []timing
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		raw.Write(append(line, '\n'))
		var e event
		if json.Unmarshal(line, &e) != nil {
			fmt.Println(string(line)) // not JSON: a build error, say
			continue
		}
		k := key{e.Package, e.Test}
		switch {
		case e.Action == "output" && e.Test == "":
			// Package lines: ok, FAIL, build failures, panics.
			if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "PASS") {
				fmt.Print(e.Output)
			}
		case e.Action == "output":
			output[k] = append(output[k], e.Output)
		case e.Action == "fail" && e.Test != "":
			fmt.Print(strings.Join(output[k], ""))
			delete(output, k)
		case e.Action == "pass" || e.Action == "skip":
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				slowest = append(slowest, timing{e.Package[strings.LastIndex(e.Package, "/")+1:] + "." + e.Test, e.Elapsed})
			}
			delete(output, k)
		}
	}
	sort.Slice(slowest, func(i, j int) bool { return slowest[i].elapsed > slowest[j].elapsed })
	fmt.Println("slowest tests:")
	for _, t := range slowest[:min(10, len(slowest))] {
		fmt.Printf("  %7.1fs  %s\n", t.elapsed, t.name)
	}
}
