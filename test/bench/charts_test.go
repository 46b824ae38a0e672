package bench

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChartsDrawEveryContender(t *testing.T) {
	rs := []Result{
		{Scenario: "1 pod(s) dropped at once: time to running (ms)", Values: map[string]float64{"agent": 400, "baseline": 380, "baseline c=∞": 380, "ratio": 1.05, "podman kube play": 300}},
		{Scenario: "10 pod(s) dropped at once: time to running (ms)", Values: map[string]float64{"agent": 2400, "baseline": 2300, "baseline c=4": 2300, "ratio": 1.04, "podman kube play": 2000}},
		{Scenario: "20 pods arriving at 2/s: time to running (ms)", Samples: map[string][]float64{"agent": {300, 500, 400}, "baseline": {280, 450}}},
		{Scenario: "churn: 1 pod added and 1 removed every 500ms for 5m0s, 50 live", Samples: map[string][]float64{"agent": {600, 700}}},
		{Scenario: "steady state, 0 idle pods", Values: map[string]float64{"pods": 0, "agent CPU (cores)": 0.004, "dockerd CPU (cores)": 0.001, "agent RSS (MiB)": 35}},
		{Scenario: "steady state, 100 idle pods", Values: map[string]float64{"pods": 100, "agent CPU (cores)": 0.04, "dockerd CPU (cores)": 0.03, "agent RSS (MiB)": 52}},
		{Scenario: "density, 250 pods: SIGTERM → exit (ms)", Values: map[string]float64{"exit": 30}},
	}
	dir := t.TempDir()
	names, err := Charts(dir, rs)
	if err != nil {
		t.Fatal(err)
	}
	// Lines per chart: agent, baseline, podman; 3 arrival and churn
	// distributions; agent and dockerd CPU; agent memory.
	want := map[string]int{"bench-bursts.svg": 3, "bench-latency.svg": 3, "bench-idle-cpu.svg": 2, "bench-idle-memory.svg": 1}
	if len(names) != len(want) {
		t.Fatalf("charts %v, want %d", names, len(want))
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Lines []struct{} `xml:"polyline"`
		}
		if err := xml.Unmarshal(data, &doc); err != nil {
			t.Errorf("%s is not well-formed SVG: %v", n, err)
		}
		if len(doc.Lines) != want[n] {
			t.Errorf("%s: %d lines, want %d", n, len(doc.Lines), want[n])
		}
		if strings.Contains(string(data), "NaN") {
			t.Errorf("%s: NaN coordinates", n)
		}
	}
}

func TestMarkdownKeepsEachResultOnItsRow(t *testing.T) {
	table := Markdown([]Result{{Scenario: "s", Target: "t", Met: true,
		Remark: "peer left out: Creating a ... \r\nCreating b ... \rdone | x\n"}})
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 {
		t.Fatalf("table has %d lines, want a header, a rule and one row:\n%s", len(lines), table)
	}
	if cells := strings.Count(lines[2], " | "); cells != 3 {
		t.Errorf("row %q has %d cell borders, want 3", lines[2], cells)
	}
}
