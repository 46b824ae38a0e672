package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The kubernetes-mixin's kubelet dashboard and alerts, at this commit of
// github.com/kubernetes-monitoring/kubernetes-mixin
// (dashboards/kubelet.libsonnet, alerts/kubelet.libsonnet,
// rules/kubelet.libsonnet), with its kubeletSelector and the single-cluster
// substitutions Grafana makes ($cluster empty, $instance any, the rate
// interval 1m).
const mixinCommit = "97dda55109574ad587d7422a445ff3731a0d5461"

const kubeletSelector = `job="kubelet", metrics_path="/metrics"`

// mixinPanels are the dashboard's queries for what this agent does; the
// panels it leaves out need other exporters or subsystems (volume manager,
// cgroup manager, storage operations, REST client: docs/operations.md).
var mixinPanels = map[string]string{
	"Running Kubelets":            `sum(kubelet_node_name{cluster="", SEL})`,
	"Running Pods":                `sum(kubelet_running_pods{cluster="", SEL, instance=~".+"}) OR sum(kubelet_running_pod_count{cluster="", SEL, instance=~".+"})`,
	"Running Containers":          `sum(kubelet_running_containers{cluster="", SEL, instance=~".+"}) OR sum(kubelet_running_container_count{cluster="", SEL, instance=~".+"})`,
	"Operation Rate":              `sum(rate(kubelet_runtime_operations_total{cluster="",SEL,instance=~".+"}[1m])) by (operation_type, instance)`,
	"Operation duration p99":      `histogram_quantile(0.99, sum(rate(kubelet_runtime_operations_duration_seconds_bucket{cluster="",SEL,instance=~".+"}[1m])) by (instance, operation_type, le))`,
	"Pod Start Rate (pod)":        `sum(rate(kubelet_pod_start_duration_seconds_count{cluster="",SEL,instance=~".+"}[1m])) by (instance)`,
	"Pod Start Rate (worker)":     `sum(rate(kubelet_pod_worker_duration_seconds_count{cluster="",SEL,instance=~".+"}[1m])) by (instance)`,
	"Pod Start Duration (worker)": `histogram_quantile(0.99, sum(rate(kubelet_pod_worker_duration_seconds_bucket{cluster="",SEL,instance=~".+"}[1m])) by (instance, le))`,
	"PLEG relist rate":            `sum(rate(kubelet_pleg_relist_duration_seconds_count{cluster="", SEL, instance=~".+"}[1m])) by (instance)`,
	"PLEG relist duration":        `histogram_quantile(0.99, sum(rate(kubelet_pleg_relist_duration_seconds_bucket{cluster="",SEL,instance=~".+"}[1m])) by (instance, le))`,
	"PLEG relist interval":        `histogram_quantile(0.99, sum(rate(kubelet_pleg_relist_interval_seconds_bucket{cluster="",SEL,instance=~".+"}[1m])) by (instance, le))`,
	"Memory":                      `process_resident_memory_bytes{cluster="",SEL,instance=~".+"}`,
	"CPU usage":                   `rate(process_cpu_seconds_total{cluster="",SEL,instance=~".+"}[1m])`,
	"Goroutines":                  `go_goroutines{cluster="",SEL,instance=~".+"}`,
	// Operation Error Rate has data only once an operation failed: a pod
	// below makes one fail.
	"Operation Error Rate": `sum(rate(kubelet_runtime_operations_errors_total{cluster="",SEL,instance=~".+"}[1m])) by (instance, operation_type)`,
}

// The mixin's rules and alerts in scope, as Prometheus loads them.
const mixinRules = `groups:
- name: kubelet.rules
  rules:
  - record: node_quantile:kubelet_pleg_relist_duration_seconds:histogram_quantile
    expr: histogram_quantile(0.99, sum(rate(kubelet_pleg_relist_duration_seconds_bucket{SEL}[5m])) by (cluster, instance, le) * on(cluster, instance) group_left(node) kubelet_node_name{SEL})
    labels: {quantile: "0.99"}
- name: kubernetes-system-kubelet
  rules:
  - alert: KubeletPlegDurationHigh
    expr: node_quantile:kubelet_pleg_relist_duration_seconds:histogram_quantile{quantile="0.99"} >= 10
  - alert: KubeletPodStartUpLatencyHigh
    expr: histogram_quantile(0.99, sum(rate(kubelet_pod_worker_duration_seconds_bucket{SEL}[5m])) by (cluster, instance, le)) * on(cluster, instance) group_left(node) kubelet_node_name{SEL} > 60
  - alert: KubeletDown
    expr: absent(up{SEL} == 1)
`

// promQuery runs an instant query through Prometheus' HTTP API.
func promQuery(base, q string) ([]struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if out.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, out.Error)
	}
	return out.Data.Result, nil
}

// A real Prometheus scrapes the four metric endpoints as the kubelet's job
// is scraped, and the kubernetes-mixin's kubelet dashboard queries and
// alerts find their series.
func TestPrometheusKubeletMixin(t *testing.T) {
	t.Parallel()
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not installed (hack/ensure-test-deps.sh installs it): %v", err)
	}
	a := startAgent(t)
	a.waitAPI()
	dir := t.TempDir()
	target := fmt.Sprintf("127.0.0.1:%d", a.port)
	var scrape strings.Builder
	for _, path := range []string{"/metrics", "/metrics/cadvisor", "/metrics/probes", "/metrics/resource"} {
		// kube-prometheus scrapes one "kubelet" job with an endpoint per
		// path, each labelled with its metrics_path.
		fmt.Fprintf(&scrape, `- job_name: kubelet%s
  metrics_path: %s
  static_configs: [{targets: ["%s"], labels: {metrics_path: "%s"}}]
  relabel_configs: [{target_label: job, replacement: kubelet}]
`, strings.ReplaceAll(path, "/", "-"), path, target, path)
	}
	cfg := "global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yaml]\nscrape_configs:\n" + scrape.String()
	must(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(strings.ReplaceAll(mixinRules, "SEL", kubeletSelector)), 0o644))
	promPort := freePort(t)
	prom := exec.Command(promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))
	promLog, err := os.Create(filepath.Join(dir, "prometheus.log"))
	must(t, err)
	prom.Stdout, prom.Stderr = promLog, promLog
	must(t, prom.Start())
	t.Cleanup(func() {
		_ = prom.Process.Kill()
		_ = prom.Wait()
		if t.Failed() {
			data, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", tail(string(data), 30))
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	waitFor(t, 30*time.Second, func() (bool, string) {
		r, err := promQuery(base, `count(up{job="kubelet"} == 1)`)
		if err != nil || len(r) == 0 {
			return false, fmt.Sprintf("targets not up: %v", err)
		}
		return r[0].Value[1] == "4", fmt.Sprintf("%v of 4 endpoints up", r[0].Value[1])
	})

	// Pods started while Prometheus watches: a probed one, and one Docker
	// cannot start (a start_container error, for the error panel).
	a.writeManifest("mixin.yaml", `apiVersion: v1
kind: Pod
metadata: {name: mixin}
spec:
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    readinessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: mixin-broken}
spec:
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["/no/such/binary"]
`)
	a.waitRunning("mixin", "app")

	for name, q := range mixinPanels {
		q := strings.ReplaceAll(q, "SEL", kubeletSelector)
		waitFor(t, 30*time.Second, func() (bool, string) {
			r, err := promQuery(base, q)
			if err != nil {
				return false, err.Error()
			}
			for _, s := range r {
				if v, err := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64); err == nil && !math.IsNaN(v) && v > 0 {
					return true, ""
				}
			}
			return false, fmt.Sprintf("panel %q of the kubernetes-mixin at %s: no positive sample from %s: %v", name, mixinCommit[:12], q, r)
		})
	}
	// The series the resource and probe endpoints add, as scraped.
	for _, q := range []string{
		`pod_cpu_usage_seconds_total{job="kubelet", metrics_path="/metrics/resource", pod="mixin"}`,
		`container_memory_working_set_bytes{job="kubelet", metrics_path="/metrics/resource", pod="mixin", container="app"}`,
		`prober_probe_total{job="kubelet", metrics_path="/metrics/probes", pod="mixin", probe_type="Readiness", result="successful"}`,
		`container_cpu_usage_seconds_total{job="kubelet", metrics_path="/metrics/cadvisor", pod="mixin", container="app"}`,
	} {
		waitFor(t, 30*time.Second, func() (bool, string) {
			r, err := promQuery(base, q)
			return err == nil && len(r) > 0, fmt.Sprintf("%s: %v %v", q, r, err)
		})
	}
	// The alerts' expressions find the node (through kubelet_node_name)
	// and none fires: the recording rule has a value for this node, the
	// start latency alert's expression without its threshold has one, and
	// KubeletDown's absent() is empty.
	waitFor(t, 30*time.Second, func() (bool, string) {
		r, err := promQuery(base, `node_quantile:kubelet_pleg_relist_duration_seconds:histogram_quantile{quantile="0.99"}`)
		return err == nil && len(r) == 1 && r[0].Metric["node"] == a.node, fmt.Sprintf("PLEG quantile by node: %v %v", r, err)
	})
	startLatency := strings.ReplaceAll(`histogram_quantile(0.99, sum(rate(kubelet_pod_worker_duration_seconds_bucket{SEL}[5m])) by (cluster, instance, le)) * on(cluster, instance) group_left(node) kubelet_node_name{SEL}`, "SEL", kubeletSelector)
	if r, err := promQuery(base, startLatency); err != nil || len(r) != 1 || r[0].Metric["node"] != a.node {
		t.Errorf("KubeletPodStartUpLatencyHigh's expression without threshold: %v %v", r, err)
	}
	if r, err := promQuery(base, `ALERTS{alertstate="firing"}`); err != nil || len(r) != 0 {
		t.Errorf("alerts firing: %v %v", r, err)
	}

	// promtool, Prometheus' own linter, finds nothing wrong with /metrics.
	if promtool, err := exec.LookPath("promtool"); err == nil {
		_, body := httpGet(a.api(true) + "/metrics")
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// metrics-server's own resource client (a module of its own under
// test/metricsserver) decodes /metrics/resource into the node's point and
// every pod's containers, as metrics-server would from a kubelet.
func TestMetricsServerScrapesResourceMetrics(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("ms.yaml", lifecyclePod("ms", "Always", `  containers:
  - name: one
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
  - name: two
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 3600"]
`))
	a.waitRunning("ms", "one", "two")
	bin := filepath.Join(t.TempDir(), "msscrape")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "metricsserver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the metrics-server scraper: %v\n%s", err, out)
	}
	type result struct {
		Node map[string]uint64 `json:"node"`
		Pods map[string]struct {
			Containers map[string]uint64 `json:"containers"`
		} `json:"pods"`
		Error string `json:"error"`
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		out, err := exec.Command(bin, "--port", strconv.Itoa(a.roPort), "--node", a.node).Output()
		if err != nil {
			return false, fmt.Sprintf("scraper: %v", err)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			return false, fmt.Sprintf("scraper output %q: %v", out, err)
		}
		pod := r.Pods["default/ms"]
		ok := r.Error == "" && r.Node[a.node] > 0 && pod.Containers["one"] > 0 && pod.Containers["two"] > 0 && pod.Containers["POD"] == 0
		return ok, fmt.Sprintf("metrics-server decoded %s", out)
	})
}

// /metrics/cadvisor shows the node and this agent's containers only: a
// container another agent owns is left out; a pod's network series are its
// infra container's (container="POD"), none for an app container or for a
// pod on the host's network; the machine, process, OOM and (from the
// agent's disk measurement) file system usage series are there.
func TestCadvisorMetricsAreThisAgentsPods(t *testing.T) {
	a := startAgent(t, "--housekeeping-interval", "1s", "--disk-usage-period", "2s")
	a.writeManifest("pods.yaml", lifecyclePod("netpod", "Always", `  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
`)+"\n---\n"+lifecyclePod("hostpod", "Always", `  hostNetwork: true
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 3600"]
`))
	a.waitRunning("netpod", "app")
	a.waitRunning("hostpod", "app")
	other, err := dockerc.CreateContainer(docker.CreateContainerOptions{
		Name: "e2e-foreign-" + a.node,
		Config: &docker.Config{Image: pauseImage, Labels: map[string]string{ownerLabel: a.node + "-other",
			"io.kubernetes.pod.name": "netpod", "io.kubernetes.pod.namespace": "default", "io.kubernetes.container.name": "app"}},
	})
	must(t, err)
	t.Cleanup(func() { _ = dockerc.RemoveContainer(docker.RemoveContainerOptions{ID: other.ID, Force: true}) })
	must(t, dockerc.StartContainer(other.ID, nil))

	type series struct{ name, pod, container, id string }
	waitFor(t, 30*time.Second, func() (bool, string) {
		resp, err := http.Get(a.api(true) + "/metrics/cadvisor")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mf, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return false, err.Error()
		}
		var got []series
		for name, f := range mf {
			for _, m := range f.Metric {
				s := series{name: name}
				for _, l := range m.Label {
					switch l.GetName() {
					case "pod":
						s.pod = l.GetValue()
					case "container":
						s.container = l.GetValue()
					case "id":
						s.id = l.GetValue()
					}
				}
				got = append(got, s)
			}
		}
		has := func(name, pod, container string) bool {
			for _, s := range got {
				if s.name == name && s.pod == pod && s.container == container {
					return true
				}
			}
			return false
		}
		for _, s := range got {
			if strings.Contains(s.id, other.ID) {
				t.Fatalf("a container of another owner is served: %+v", s)
			}
			if strings.HasPrefix(s.name, "container_network_") && s.id != "/" && (s.container != "POD" || s.pod == "hostpod") {
				t.Fatalf("network series of %s/%s: only a pod's own infra container has them", s.pod, s.container)
			}
		}
		for _, want := range []series{
			{name: "container_network_receive_bytes_total", pod: "netpod", container: "POD"},
			{name: "container_cpu_usage_seconds_total", pod: "netpod", container: "app"},
			{name: "container_cpu_usage_seconds_total", pod: "hostpod", container: "app"},
			{name: "container_processes", pod: "netpod", container: "app"},
			{name: "container_threads", pod: "netpod", container: "app"},
			{name: "container_file_descriptors", pod: "netpod", container: "app"},
			{name: "container_sockets", pod: "netpod", container: "app"},
			{name: "container_oom_events_total", pod: "netpod", container: "app"},
			{name: "container_fs_usage_bytes", pod: "netpod", container: "app"},
			{name: "machine_cpu_cores"},
			{name: "machine_memory_bytes"},
		} {
			if !has(want.name, want.pod, want.container) {
				return false, fmt.Sprintf("no %s for %s/%s", want.name, want.pod, want.container)
			}
		}
		return true, ""
	})
}

// cgroupFile reads a number from a file of the container's cgroup in the
// given v1 hierarchy (cpuacct, memory), found through its main process.
func cgroupValue(t *testing.T, pid int, hierarchy, file string) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	must(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, h := range strings.Split(parts[1], ",") {
			if h != hierarchy {
				continue
			}
			content, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", hierarchy, parts[2], file))
			must(t, err)
			if file == "memory.stat" { // the working set: usage less inactive file pages
				usage, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", hierarchy, parts[2], "memory.usage_in_bytes"))
				must(t, err)
				u, _ := strconv.ParseFloat(strings.TrimSpace(string(usage)), 64)
				for _, l := range strings.Split(string(content), "\n") {
					if v, ok := strings.CutPrefix(l, "total_inactive_file "); ok {
						inactive, _ := strconv.ParseFloat(v, 64)
						return u - inactive
					}
				}
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(string(content)), 64)
			must(t, err)
			return v
		}
	}
	t.Fatalf("no %s cgroup for pid %d (cgroup v1 expected on this machine)", hierarchy, pid)
	return 0
}

// netRx is the bytes received on eth0 of the network namespace of pid.
func netRx(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	must(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if name, rest, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && name == "eth0" {
			v, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v
		}
	}
	t.Fatalf("no eth0 in the network namespace of %d", pid)
	return 0
}

// A pod's CPU, memory and network summed over its series of
// /metrics/cadvisor agree with the kernel's own counters: the cgroups' CPU
// time over the same window, their working set, and the bytes its network
// namespace received (counted once, not once per container).
func TestCadvisorPodSumsMatchCgroups(t *testing.T) {
	a := startAgent(t, "--housekeeping-interval", "1s")
	a.writeManifest("sums.yaml", lifecyclePod("sums", "Always", `  containers:
  - name: spin
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while :; do :; done"]
    resources: {limits: {cpu: 500m}}
  - name: hold
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "head -c 67108864 /dev/zero > /mem/fill; exec /testserver"]
    volumeMounts: [{name: mem, mountPath: /mem}]
  volumes:
  - name: mem
    emptyDir: {medium: Memory}
`))
	running := a.waitRunning("sums", "spin", "hold")
	a.waitStats()
	pids := map[string]int{}
	for _, name := range []string{"spin", "hold"} {
		pids[name] = inspect(t, running[name].ID).State.Pid
	}
	podIP := ""
	waitFor(t, 20*time.Second, func() (bool, string) {
		podIP = a.status("sums").PodIP
		return podIP != "", "no pod IP"
	})
	// podSum is the pod's sum of one cAdvisor series, and the time of its
	// newest sample.
	podSum := func(name string) (float64, int64) {
		resp, err := http.Get(a.api(true) + "/metrics/cadvisor")
		must(t, err)
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mf, err := parser.TextToMetricFamilies(resp.Body)
		must(t, err)
		sum, newest := 0.0, int64(0)
		for _, m := range mf[name].GetMetric() {
			if !labelsMatch(m, map[string]string{"pod": "sums"}) {
				continue
			}
			if m.Counter != nil {
				sum += m.Counter.GetValue()
			} else {
				sum += m.Gauge.GetValue()
			}
			newest = max(newest, m.GetTimestampMs())
		}
		return sum, newest
	}
	kernelCPU := func() float64 {
		return (cgroupValue(t, pids["spin"], "cpuacct", "cpuacct.usage") + cgroupValue(t, pids["hold"], "cpuacct", "cpuacct.usage")) / 1e9
	}
	// Both sides sampled when cAdvisor has just taken a sample.
	settle := func() {
		_, before := podSum("container_cpu_usage_seconds_total")
		waitFor(t, 10*time.Second, func() (bool, string) {
			_, now := podSum("container_cpu_usage_seconds_total")
			return now > before, "no new cAdvisor sample"
		})
	}
	settle()
	c0, _ := podSum("container_cpu_usage_seconds_total")
	k0 := kernelCPU()
	n0, _ := podSum("container_network_receive_bytes_total")
	r0 := netRx(t, pids["hold"])
	// Traffic into the pod: 100 requests to its server.
	for i := 0; i < 100; i++ {
		httpGet(fmt.Sprintf("http://%s:8080/?pad=%s", podIP, strings.Repeat("x", 1000)))
	}
	time.Sleep(30 * time.Second)
	settle()
	c1, _ := podSum("container_cpu_usage_seconds_total")
	k1 := kernelCPU()
	n1, _ := podSum("container_network_receive_bytes_total")
	r1 := netRx(t, pids["hold"])
	within := func(what string, got, want float64) {
		if want <= 0 || got < 0.9*want || got > 1.1*want {
			t.Errorf("%s: the pod's series sum to %.0f, the kernel counts %.0f (want within 10%%)", what, got, want)
		} else {
			t.Logf("%s: series %.3g, kernel %.3g", what, got, want)
		}
	}
	within("CPU seconds over 30 s", c1-c0, k1-k0)
	within("bytes received over 30 s", n1-n0, r1-r0)
	ws, _ := podSum("container_memory_working_set_bytes")
	within("working set", ws, cgroupValue(t, pids["spin"], "memory", "memory.stat")+cgroupValue(t, pids["hold"], "memory", "memory.stat"))
}
