package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The resource metrics, as the kubelet's resource collector names them: the
// few series metrics-server and the autoscalers read, each stamped with the
// time of its sample.
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"Current working set of the node in bytes", nil, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	scrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// resourceCollector turns one summary into the resource metrics. The infra
// container is not in the summary's containers, so it is not here either.
type resourceCollector struct {
	summary *statsapi.Summary // nil: the scrape failed
}

func (c resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, containerCPUDesc, containerMemoryDesc,
		containerStartDesc, podCPUDesc, podMemoryDesc, scrapeErrorDesc} {
		ch <- d
	}
}

func (c resourceCollector) Collect(ch chan<- prometheus.Metric) {
	failed := 0.0
	if c.summary == nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed)
	if c.summary == nil {
		return
	}
	// at stamps a sample with the time it was taken.
	at := func(t time.Time, d *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(t, prometheus.MustNewConstMetric(d, typ, v, labels...))
	}
	cpu := func(d *prometheus.Desc, st *statsapi.CPUStats, labels ...string) {
		if st != nil && st.UsageCoreNanoSeconds != nil {
			at(st.Time.Time, d, prometheus.CounterValue, float64(*st.UsageCoreNanoSeconds)/1e9, labels...)
		}
	}
	memory := func(d *prometheus.Desc, st *statsapi.MemoryStats, labels ...string) {
		if st != nil && st.WorkingSetBytes != nil {
			at(st.Time.Time, d, prometheus.GaugeValue, float64(*st.WorkingSetBytes), labels...)
		}
	}
	n := c.summary.Node
	cpu(nodeCPUDesc, n.CPU)
	memory(nodeMemoryDesc, n.Memory)
	for _, p := range c.summary.Pods {
		cpu(podCPUDesc, p.CPU, p.PodRef.Name, p.PodRef.Namespace)
		memory(podMemoryDesc, p.Memory, p.PodRef.Name, p.PodRef.Namespace)
		for _, ct := range p.Containers {
			cpu(containerCPUDesc, ct.CPU, ct.Name, p.PodRef.Name, p.PodRef.Namespace)
			memory(containerMemoryDesc, ct.Memory, ct.Name, p.PodRef.Name, p.PodRef.Namespace)
			if !ct.StartTime.IsZero() {
				at(ct.StartTime.Time, containerStartDesc, prometheus.GaugeValue, float64(ct.StartTime.UnixNano())/1e9,
					ct.Name, p.PodRef.Name, p.PodRef.Namespace)
			}
		}
	}
}

// resourceMetrics serves /metrics/resource, the endpoint metrics-server
// scrapes. A failed stats read is a scrape with resource_scrape_error 1,
// as the kubelet answers, not an HTTP error.
func (s *Server) resourceMetrics(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	var c resourceCollector
	if s.Stats != nil && s.Stats.Err() == nil {
		c.summary, _ = s.buildSummary()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// probeMetrics serves /metrics/probes: the prober's per-container series.
func (s *Server) probeMetrics(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	if s.ProbeMetrics == nil {
		writeError(w, http.StatusServiceUnavailable, "probe metrics are unavailable")
		return
	}
	promhttp.HandlerFor(s.ProbeMetrics, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}
