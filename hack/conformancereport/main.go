// Command conformancereport turns the JUnit XML of hack/conformance.sh's
// ginkgo runs into docs/conformance.md: counts per area (sig-node,
// sig-storage, ...) and for the [Conformance] specs, then every spec with its
// result and, for each failure, the reason found (hack/conformance-reasons.tsv:
// a spec-name substring, a tab, the reason) or else the suite's own message.
// With --check it writes nothing and fails unless every spec that ran passed
// (the smoke of make test).
package main

import (
	"bufio"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

type testcase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Failure *struct {
		Message string `xml:"message,attr"`
		Body    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
	} `xml:"error"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
}

type suites struct {
	Suites []struct {
		Cases []testcase `xml:"testcase"`
	} `xml:"testsuite"`
}

// spec is one spec of a run that ran (or was skipped by the suite itself,
// not by the label filter).
type spec struct {
	name, area, result, reason string
	conformance                bool
	seconds                    float64
}

var areaRE = regexp.MustCompile(`\[(sig-[a-z-]+)\]`)

func main() {
	check := flag.Bool("check", false, "fail unless every spec that ran passed; write nothing")
	times := flag.String("times", "", "the runs' times file (hack/conformance.sh writes it)")
	reasonsFile := flag.String("reasons", "hack/conformance-reasons.tsv", "known failures' reasons")
	title := flag.String("title", "NodeConformance: Kubernetes v1.37.2's own node suite against the agent", "the document's title")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: conformancereport [--check] [--times F] RUN.xml...")
		os.Exit(2)
	}
	reasons := readReasons(*reasonsFile)
	var runs []run
	for _, f := range flag.Args() {
		specs, err := read(f, reasons)
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformancereport:", err)
			os.Exit(1)
		}
		runs = append(runs, run{file: f, specs: specs})
	}
	if *check {
		failed := 0
		for _, r := range runs {
			for _, s := range r.specs {
				if s.result != "passed" {
					failed++
					fmt.Fprintf(os.Stderr, "%s: %s: %s\n", s.result, s.name, s.reason)
				}
			}
			fmt.Fprintf(os.Stderr, "%s: %d specs, %d not passed\n", r.file, len(r.specs), failed)
			if len(r.specs) == 0 {
				fmt.Fprintln(os.Stderr, "conformancereport: no spec ran")
				os.Exit(1)
			}
		}
		if failed > 0 {
			os.Exit(1)
		}
		return
	}
	write(os.Stdout, runs, *times, *title)
}

type run struct {
	file  string
	specs []spec
}

func read(file string, reasons [][2]string) ([]spec, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var s suites
	if err := xml.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []spec
	for _, su := range s.Suites {
		for _, c := range su.Cases {
			if !strings.HasPrefix(c.Name, "[It]") {
				continue // the suite's set-up and tear-down nodes
			}
			sp := spec{name: strings.TrimSpace(strings.TrimPrefix(c.Name, "[It]")), result: c.Status, seconds: c.Time,
				conformance: strings.Contains(c.Name, "[Conformance]")}
			if m := areaRE.FindStringSubmatch(c.Name); m != nil {
				sp.area = m[1]
			}
			switch {
			case c.Skipped != nil && c.Status == "skipped" && !strings.HasPrefix(c.Skipped.Message, "skipped - "):
				continue // left out by the label filter: not part of the run
			case c.Skipped != nil:
				sp.reason = firstLine(strings.TrimPrefix(c.Skipped.Message, "skipped - "))
			case c.Failure != nil:
				sp.reason = firstLine(c.Failure.Message)
			case c.Error != nil:
				sp.reason = firstLine(c.Error.Message)
			}
			if sp.result != "passed" && sp.result != "skipped" {
				sp.result = "failed"
				for _, r := range reasons {
					if strings.Contains(sp.name, r[0]) {
						sp.reason = r[1]
						break
					}
				}
			}
			out = append(out, sp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func readReasons(file string) [][2]string {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, "\t"); ok && !strings.HasPrefix(line, "#") {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

type count struct{ passed, failed, skipped int }

func (c *count) add(result string) {
	switch result {
	case "passed":
		c.passed++
	case "skipped":
		c.skipped++
	default:
		c.failed++
	}
}

func write(w io.Writer, runs []run, timesFile, title string) {
	fmt.Fprintln(w, "# "+title)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Written by `make conformance` (hack/conformance.sh): `e2e.test` of k8s.io/kubernetes v1.37.2, run")
	fmt.Fprintln(w, "as published by its ginkgo, against a real v1.37.2 control plane whose nodes are agents on this")
	fmt.Fprintln(w, "machine's Docker. Images are built offline under the suite's names (hack/conformance-images.sh).")
	fmt.Fprintln(w, "agnhost (and kitten, nautilus on it) and nonewprivs are built from the module's own sources; busybox is")
	fmt.Fprintln(w, "1.37.0 built static from Debian's source package without Debian's installer patch to ash, as upstream's")
	fmt.Fprintln(w, "(agnhost's shell is Debian's dynamic busybox, with curl, bash and OpenBSD's nc, as upstream's Alpine")
	fmt.Fprintln(w, "image has); pause is the project's; nginx (busybox's httpd on port 80), nonroot and")
	fmt.Fprintln(w, "glibc-dns-testing (busybox) are stand-ins with what the specs use of them; agnhost 2.55, the previous")
	fmt.Fprintln(w, "agnhost the StatefulSet specs start from, is the current build under that tag.")
	fmt.Fprintln(w, "The reasons of failures come from hack/conformance-reasons.tsv, or else are the suite's message.")
	if b, err := os.ReadFile(timesFile); err == nil {
		fmt.Fprintf(w, "\nRun times:\n\n```\n%s```\n", b)
	}
	for _, r := range runs {
		total, conf := count{}, count{}
		areas := map[string]*count{}
		for _, s := range r.specs {
			total.add(s.result)
			if s.conformance {
				conf.add(s.result)
			}
			if areas[s.area] == nil {
				areas[s.area] = &count{}
			}
			areas[s.area].add(s.result)
		}
		fmt.Fprintf(w, "\n## %s\n\n", strings.TrimSuffix(r.file[strings.LastIndexByte(r.file, '/')+1:], ".xml"))
		fmt.Fprintln(w, "| | specs | passed | failed | skipped by the suite |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
		row := func(name string, c count) {
			fmt.Fprintf(w, "| %s | %d | %d | %d | %d |\n", name, c.passed+c.failed+c.skipped, c.passed, c.failed, c.skipped)
		}
		row("**all**", total)
		row("[Conformance]", conf)
		var names []string
		for a := range areas {
			names = append(names, a)
		}
		sort.Strings(names)
		for _, a := range names {
			row(a, *areas[a])
		}
		fmt.Fprintln(w, "\nNot passed:\n\n| spec | reason |\n|---|---|")
		for _, s := range r.specs {
			if s.result != "passed" {
				fmt.Fprintf(w, "| %s | %s |\n", escape(s.name), escape(s.reason))
			}
		}
		fmt.Fprintln(w, "\nEvery spec:\n\n| result | spec | s |\n|---|---|---:|")
		for _, s := range r.specs {
			fmt.Fprintf(w, "| %s | %s | %.0f |\n", s.result, escape(s.name), s.seconds)
		}
	}
}

func escape(s string) string { return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s) }
