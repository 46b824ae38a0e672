package e2e

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// TestCNIPodStartLatency measures pod start latency in CNI mode (the
// reference plugins: bridge, host-local, firewall, portmap, loopback)
// against Docker's bridge, for bursts of 10 and 30 pods, the two modes
// alternating in the same run (each burst under a fresh agent). It reports
// each pod's time from its manifest's write to its container running
// (median, 90th percentile, last) and the ratios CNI / bridge. A
// measurement, not a check: it runs only with CNI_LATENCY=<rounds>.
func TestCNIPodStartLatency(t *testing.T) {
	rounds := 0
	if _, err := fmt.Sscan(os.Getenv("CNI_LATENCY"), &rounds); err != nil || rounds < 1 {
		t.Skip("a measurement: set CNI_LATENCY=<rounds> to run it")
	}
	type result struct{ p50, p90, last []time.Duration }
	results := map[string]*result{}
	for round := range rounds {
		for _, n := range []int{10, 30} {
			modes := []string{"bridge", "cni"}
			if round%2 == 1 {
				modes = []string{"cni", "bridge"}
			}
			for _, mode := range modes {
				lat := measureBurst(t, mode, n)
				key := fmt.Sprintf("%s/%d", mode, n)
				if results[key] == nil {
					results[key] = &result{}
				}
				r := results[key]
				r.p50, r.p90, r.last = append(r.p50, lat[len(lat)/2]), append(r.p90, lat[len(lat)*9/10]), append(r.last, lat[len(lat)-1])
				t.Logf("round %d, %d pods, %s: median %v, p90 %v, last %v", round+1, n, mode,
					lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*9/10].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
			}
		}
	}
	median := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	for _, n := range []int{10, 30} {
		b, c := results[fmt.Sprintf("bridge/%d", n)], results[fmt.Sprintf("cni/%d", n)]
		ratio := func(x, y []time.Duration) float64 { return median(x).Seconds() / median(y).Seconds() }
		t.Logf("%d pods, median of %d rounds: bridge median %v p90 %v last %v; cni median %v p90 %v last %v; ratio cni/bridge: median %.2f, p90 %.2f, last %.2f",
			n, rounds, median(b.p50).Round(time.Millisecond), median(b.p90).Round(time.Millisecond), median(b.last).Round(time.Millisecond),
			median(c.p50).Round(time.Millisecond), median(c.p90).Round(time.Millisecond), median(c.last).Round(time.Millisecond),
			ratio(c.p50, b.p50), ratio(c.p90, b.p90), ratio(c.last, b.last))
	}
}

// measureBurst starts an agent in mode, writes n pod manifests at once and
// returns each pod's latency to its container running, sorted. The agent
// removes the pods (and so detaches them) before it stops.
func measureBurst(t *testing.T, mode string, n int) []time.Duration {
	var lat []time.Duration
	t.Run(fmt.Sprintf("%s-%d", mode, n), func(t *testing.T) {
		var a *agent
		if mode == "cni" {
			net := newCNITestNet(t)
			net.write("10-e2e.conflist", net.conflist(net.subnet))
			a = net.startAgent(t)
		} else {
			a = startAgent(t)
		}
		a.waitAPI()
		a.waitRounds(1)
		start := time.Now()
		for i := range n {
			a.writeManifest(fmt.Sprintf("p%d.yaml", i), fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: p%d}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    imagePullPolicy: IfNotPresent
    command: %s
`, i, testImage, sleeper))
		}
		seen := map[string]time.Duration{}
		waitFor(t, 5*time.Minute, func() (bool, string) {
			list, err := dockerc.ListContainers(docker.ListContainersOptions{Filters: map[string][]string{
				"label": {ownerLabel + "=" + a.node, "io.kubernetes.container.name=app"}}})
			if err != nil {
				return false, err.Error()
			}
			now := time.Since(start)
			for _, c := range list {
				pod := c.Labels["io.kubernetes.pod.name"]
				if _, ok := seen[pod]; !ok && strings.HasPrefix(c.State, "running") {
					seen[pod] = now
				}
			}
			return len(seen) == n, fmt.Sprintf("%d of %d pods running", len(seen), n)
		})
		for _, d := range seen {
			lat = append(lat, d)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	})
	if len(lat) < n {
		t.Fatalf("%s, %d pods: no measurement", mode, n)
	}
	return lat
}
