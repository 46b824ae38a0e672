// Package metrics defines the agent's own Prometheus metrics, served at
// /metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const namespace = "kubelet"

// Metrics is the agent's set of metrics, registered on its own registry (not
// the global one, so libraries' metrics never leak in).
type Metrics struct {
	Registry *prometheus.Registry

	SyncLoopDuration  prometheus.Histogram
	PodWorkerDuration *prometheus.HistogramVec // by operation: sync, kill
	DockerOpDuration  *prometheus.HistogramVec // by operation
	DockerOpErrors    *prometheus.CounterVec   // by operation
	RelistDuration    prometheus.Histogram
	RunningPods       prometheus.Gauge
	RunningContainers prometheus.Gauge
	ProbeResults      *prometheus.CounterVec // by probe type and result
	SourceErrors      *prometheus.CounterVec // by source
	ContainerRestarts prometheus.Counter
	// StartedContainers counts attempts to create and start a container, by
	// container_type (container, init_container); StartedContainerErrors
	// the failed ones, by container_type and code (the waiting reason, e.g.
	// CreateContainerError, RunContainerError). Names and labels are the
	// kubelet's.
	StartedContainers      *prometheus.CounterVec
	StartedContainerErrors *prometheus.CounterVec
	// StartedPods counts attempts to make a pod's sandbox (infra container
	// and volumes); StartedPodErrors the failed ones.
	StartedPods      prometheus.Counter
	StartedPodErrors prometheus.Counter
}

// New creates and registers the metrics.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		SyncLoopDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "sync_loop_iteration_duration_seconds",
			Help: "Duration of one sync loop iteration.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		PodWorkerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "pod_worker_duration_seconds",
			Help: "Duration of one pod worker sync, by operation.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"operation"}),
		DockerOpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "docker_operations_duration_seconds",
			Help: "Latency of Docker operations, by operation.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"operation"}),
		DockerOpErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "docker_operations_errors_total",
			Help: "Failed Docker operations, by operation.",
		}, []string{"operation"}),
		RelistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "relist_duration_seconds",
			Help: "Duration of one relist of the node's containers.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
		RunningPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "running_pods", Help: "Pods with a running infra container.",
		}),
		RunningContainers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "running_containers", Help: "Running containers of this agent.",
		}),
		ProbeResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "prober_probe_total", Help: "Probe results, by probe type and result.",
		}, []string{"probe_type", "result"}),
		SourceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "config_source_errors_total", Help: "Failures of config sources, by source.",
		}, []string{"source"}),
		ContainerRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "container_restarts_total", Help: "Containers restarted after they exited or failed a probe.",
		}),
		StartedContainers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: namespace, Name: "started_containers_total", Help: "Cumulative number of containers started",
		}, []string{"container_type"}),
		StartedContainerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: namespace, Name: "started_containers_errors_total", Help: "Cumulative number of errors when starting containers",
		}, []string{"container_type", "code"}),
		StartedPods: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: namespace, Name: "started_pods_total", Help: "Cumulative number of pods started",
		}),
		StartedPodErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: namespace, Name: "started_pods_errors_total", Help: "Cumulative number of errors when starting pods",
		}),
	}
	m.Registry.MustRegister(m.StartedContainers, m.StartedContainerErrors, m.StartedPods, m.StartedPodErrors, m.SyncLoopDuration, m.PodWorkerDuration, m.DockerOpDuration, m.DockerOpErrors,
		m.RelistDuration, m.RunningPods, m.RunningContainers, m.ProbeResults, m.SourceErrors, m.ContainerRestarts,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
