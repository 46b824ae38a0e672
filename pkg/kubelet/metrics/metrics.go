// Package metrics defines the agent's Prometheus metrics. Where the kubelet
// has a metric for the same thing, the name, type, labels and buckets are
// the kubelet's (pkg/kubelet/metrics and pkg/kubelet/prober upstream), so
// dashboards and alerts written for the kubelet read them unchanged; the
// agent's own names remain only where the kubelet has none.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/types"
)

const subsystem = "kubelet"

// Values of the container_type label.
const (
	Container     = "container"
	InitContainer = "init_container"
)

// podStartupBuckets are the kubelet's buckets for pod start latencies.
var podStartupBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// Metrics is the agent's set of metrics, on registries of its own (not the
// global one, so libraries' metrics never leak in): Registry is served at
// /metrics, ProbeRegistry at /metrics/probes.
type Metrics struct {
	Registry      *prometheus.Registry
	ProbeRegistry *prometheus.Registry

	// The kubelet's.
	NodeName               *prometheus.GaugeVec     // node
	PodWorkerDuration      *prometheus.HistogramVec // operation_type: create, update, sync, kill
	PodWorkerStartDuration prometheus.Histogram
	PodStartDuration       prometheus.Histogram
	PodStartSLIDuration    *prometheus.HistogramVec // first_with_network
	PLEGRelistDuration     prometheus.Histogram
	PLEGRelistInterval     prometheus.Histogram
	PLEGLastSeen           prometheus.Gauge
	RunningPods            prometheus.Gauge
	// GracefulShutdownStart and GracefulShutdownEnd are the last graceful
	// node shutdown's start and end (unix seconds; the end 0 while it
	// runs).
	GracefulShutdownStart     prometheus.Gauge
	GracefulShutdownEnd       prometheus.Gauge
	RunningContainers         *prometheus.GaugeVec // container_state: created, running, exited
	RuntimeOperations         *prometheus.CounterVec
	RuntimeOperationsErrors   *prometheus.CounterVec
	RuntimeOperationsDuration *prometheus.HistogramVec // operation_type: the CRI method's name
	RestartedPods             *prometheus.CounterVec   // static
	Preemptions               *prometheus.CounterVec   // preemption_signal: the resource a critical pod lacked
	StartedContainers         *prometheus.CounterVec   // container_type
	StartedContainerErrors    *prometheus.CounterVec   // container_type, code (the waiting reason)
	StartedPods               prometheus.Counter
	StartedPodErrors          prometheus.Counter
	ProbeResults              *prometheus.CounterVec   // on ProbeRegistry
	ProbeDuration             *prometheus.HistogramVec // on ProbeRegistry

	// The agent's own: the kubelet has no equivalent.
	SyncLoopDuration  prometheus.Histogram
	SourceErrors      *prometheus.CounterVec // source
	ContainerRestarts prometheus.Counter
}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: name, Help: help}, labels)
}

func histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: name, Help: help, Buckets: buckets}, labels)
}

func histogram1(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: subsystem, Name: name, Help: help, Buckets: buckets})
}

func counter1(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Subsystem: subsystem, Name: name, Help: help})
}

func gauge1(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: subsystem, Name: name, Help: help})
}

func gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: name, Help: help}, labels)
}

// New creates and registers the metrics of the node named nodeName.
func New(nodeName string) *Metrics {
	def := prometheus.DefBuckets
	m := &Metrics{
		Registry:      prometheus.NewRegistry(),
		ProbeRegistry: prometheus.NewRegistry(),

		NodeName:               gauge("node_name", "The node's name. The count is always 1.", "node"),
		PodWorkerDuration:      histogram("pod_worker_duration_seconds", "Duration in seconds to sync a single pod. Broken down by operation type: create, update, sync or kill", def, "operation_type"),
		PodWorkerStartDuration: histogram1("pod_worker_start_duration_seconds", "Duration in seconds from the agent seeing a pod to starting a worker.", def),
		PodStartDuration:       histogram1("pod_start_duration_seconds", "Duration in seconds from the agent seeing a pod for the first time to the pod starting to run", podStartupBuckets),
		PodStartSLIDuration:    histogram("pod_start_sli_duration_seconds", "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from the agent seeing the pod to when all its containers are reported as started", podStartupBuckets, "first_with_network"),
		PLEGRelistDuration:     histogram1("pleg_relist_duration_seconds", "Duration in seconds for relisting pods in PLEG.", def),
		PLEGRelistInterval:     histogram1("pleg_relist_interval_seconds", "Interval in seconds between relisting in PLEG.", def),
		PLEGLastSeen:           gauge1("pleg_last_seen_seconds", "Timestamp in seconds when PLEG was last seen active."),
		RunningPods:            gauge1("running_pods", "Number of pods that have a running pod sandbox"),
		GracefulShutdownStart:  gauge1("graceful_shutdown_start_time_seconds", "Last graceful shutdown start time since unix epoch in seconds"),
		GracefulShutdownEnd:    gauge1("graceful_shutdown_end_time_seconds", "Last graceful shutdown end time since unix epoch in seconds"),
		RunningContainers:      gauge("running_containers", "Number of containers currently running", "container_state"),
		RuntimeOperations:      counter("runtime_operations_total", "Cumulative number of runtime operations by operation type.", "operation_type"),
		RuntimeOperationsErrors: counter("runtime_operations_errors_total",
			"Cumulative number of runtime operation errors by operation type.", "operation_type"),
		RuntimeOperationsDuration: histogram("runtime_operations_duration_seconds", "Duration in seconds of runtime operations. Broken down by operation type.",
			prometheus.ExponentialBuckets(.005, 2.5, 14), "operation_type"),
		RestartedPods:     counter("restarted_pods_total", "Number of pods that have been restarted because they were deleted and recreated with the same UID while the agent was watching them", "static"),
		Preemptions:       counter("preemptions", "Cumulative number of pod preemptions by preemption resource", "preemption_signal"),
		StartedContainers: counter("started_containers_total", "Cumulative number of containers started", "container_type"),
		StartedContainerErrors: counter("started_containers_errors_total", "Cumulative number of errors when starting containers",
			"container_type", "code"),
		StartedPods:      counter1("started_pods_total", "Cumulative number of pods started"),
		StartedPodErrors: counter1("started_pods_errors_total", "Cumulative number of errors when starting pods"),
		ProbeResults: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "prober", Name: "probe_total",
			Help: "Cumulative number of a liveness, readiness or startup probe for a container by result."},
			[]string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		ProbeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "prober", Name: "probe_duration_seconds",
			Help: "Duration in seconds for a probe response.", Buckets: def},
			[]string{"probe_type", "container", "pod", "namespace"}),

		SyncLoopDuration: histogram1("sync_loop_iteration_duration_seconds", "Duration of one sync loop iteration.",
			prometheus.ExponentialBuckets(0.0001, 4, 10)),
		SourceErrors:      counter("config_source_errors_total", "Failures of config sources, by source.", "source"),
		ContainerRestarts: counter1("container_restarts_total", "Containers restarted after they exited or failed a probe."),
	}
	m.NodeName.WithLabelValues(nodeName).Set(1)
	for _, t := range []string{Container, InitContainer} {
		m.StartedContainers.WithLabelValues(t) // present at 0, so rates have a start
	}
	for _, s := range []string{"created", "running", "exited"} {
		m.RunningContainers.WithLabelValues(s)
	}
	m.Registry.MustRegister(m.NodeName, m.PodWorkerDuration, m.PodWorkerStartDuration, m.PodStartDuration, m.PodStartSLIDuration,
		m.PLEGRelistDuration, m.PLEGRelistInterval, m.PLEGLastSeen, m.RunningPods, m.RunningContainers,
		m.GracefulShutdownStart, m.GracefulShutdownEnd,
		m.RuntimeOperations, m.RuntimeOperationsErrors, m.RuntimeOperationsDuration, m.RestartedPods, m.Preemptions,
		m.StartedContainers, m.StartedContainerErrors, m.StartedPods, m.StartedPodErrors,
		m.SyncLoopDuration, m.SourceErrors, m.ContainerRestarts,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.ProbeRegistry.MustRegister(m.ProbeResults, m.ProbeDuration)
	return m
}

// SetShutdownTimes sets the graceful-shutdown gauges: start and end as unix
// seconds, a zero time as 0.
func (m *Metrics) SetShutdownTimes(start, end time.Time) {
	m.GracefulShutdownStart.Set(unixSeconds(start))
	m.GracefulShutdownEnd.Set(unixSeconds(end))
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// ObserveProbe records one probe of a container (probeType Liveness,
// Readiness or Startup), with the kubelet's labels and result values.
func (m *Metrics) ObserveProbe(probeType string, success bool, container, pod, namespace string, uid types.UID, took time.Duration) {
	result := "failed"
	if success {
		result = "successful"
	}
	m.ProbeResults.WithLabelValues(probeType, result, container, pod, namespace, string(uid)).Inc()
	if success { // the kubelet times only the probes that answered
		m.ProbeDuration.WithLabelValues(probeType, container, pod, namespace).Observe(took.Seconds())
	}
}

// ForgetPod drops a gone pod's per-pod series, so they do not pile up.
func (m *Metrics) ForgetPod(uid types.UID, namespace, name string) {
	m.ProbeResults.DeletePartialMatch(prometheus.Labels{"pod_uid": string(uid)})
	m.ProbeDuration.DeletePartialMatch(prometheus.Labels{"pod": name, "namespace": namespace})
}

// TrackPodState serves, at scrape time, the number of entries in each of the
// agent's per-pod tables (kubelet_pod_state_entries{table}): after pods
// come and go it must fall back with the pod count, or state is kept for
// pods that are gone.
func (m *Metrics) TrackPodState(sizes func() map[string]int) {
	m.Registry.MustRegister(podStateCollector{sizes})
}

var podStateDesc = prometheus.NewDesc(subsystem+"_pod_state_entries",
	"Entries in each of the agent's per-pod tables (or per-container, by their names).", []string{"table"}, nil)

type podStateCollector struct{ sizes func() map[string]int }

func (c podStateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- podStateDesc }

func (c podStateCollector) Collect(ch chan<- prometheus.Metric) {
	for table, n := range c.sizes() {
		ch <- prometheus.MustNewConstMetric(podStateDesc, prometheus.GaugeValue, float64(n), table)
	}
}

// WorkingPods is one series of kubelet_working_pods: the pod workers in a
// phase of the pod's life (lifecycle: sync, terminating, terminated), by
// how the config knows their pods (config: desired, orphan — removed from
// it —, runtime_only — found on the node only) and whether they are static.
type WorkingPods struct {
	Lifecycle, Config string
	Static            bool
	Count             int
}

// TrackWorkingPods serves kubelet_working_pods, the kubelet's gauge of the
// pod workers by phase, from count at scrape time.
func (m *Metrics) TrackWorkingPods(count func() []WorkingPods) {
	m.Registry.MustRegister(workingPodsCollector{count})
}

var workingPodsDesc = prometheus.NewDesc(subsystem+"_working_pods",
	"Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only (also orphaned), and whether the pod is static.",
	[]string{"lifecycle", "config", "static"}, nil)

type workingPodsCollector struct{ count func() []WorkingPods }

func (c workingPodsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- workingPodsDesc }

// Collect reports every combination, zero where no worker is in it, as the
// kubelet does: a series does not vanish when its last pod moves on.
func (c workingPodsCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct {
		lifecycle, config string
		static            bool
	}
	n := map[key]int{}
	for _, w := range c.count() {
		n[key{w.Lifecycle, w.Config, w.Static}] += w.Count
	}
	for _, lc := range []string{"sync", "terminating", "terminated"} {
		for _, cfg := range []string{"desired", "orphan", "runtime_only"} {
			for _, static := range []bool{false, true} {
				label := ""
				if static {
					label = "true"
				}
				ch <- prometheus.MustNewConstMetric(workingPodsDesc, prometheus.GaugeValue, float64(n[key{lc, cfg, static}]), lc, cfg, label)
			}
		}
	}
}
