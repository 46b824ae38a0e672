package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/diskusage"
)

// statsAvailable answers 503 with the reason when cAdvisor is not running.
func (s *Server) statsAvailable(w http.ResponseWriter) bool {
	msg := "stats are unavailable"
	if s.Stats != nil {
		err := s.Stats.Err()
		if err == nil {
			return true
		}
		msg += ": " + err.Error()
	}
	writeError(w, http.StatusServiceUnavailable, msg)
	return false
}

func (s *Server) spec(w http.ResponseWriter, _ *http.Request, _ map[string]string) {
	if !s.statsAvailable(w) {
		return
	}
	mi, err := s.Stats.MachineInfo()
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("machine info: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, mi)
}

// infoRequest reads a ContainerInfoRequest from the body, or num_stats from
// the query; the default is cAdvisor's (the last 60 samples).
func infoRequest(r *http.Request) (*cadvisorapi.ContainerInfoRequest, error) {
	req := cadvisorapi.DefaultContainerInfoRequest()
	if r.Body != nil {
		body, err := readAll(r)
		if err != nil {
			return nil, err
		}
		if len(strings.TrimSpace(string(body))) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				return nil, fmt.Errorf("ContainerInfoRequest body: %w", err)
			}
		}
	}
	if n := r.URL.Query().Get("num_stats"); n != "" {
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("num_stats %q: want a non-negative integer", n)
		}
		req.NumStats = v
	}
	return &req, nil
}

func (s *Server) rootStats(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	if !s.statsAvailable(w) {
		return
	}
	req, err := infoRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	info, err := s.Stats.ContainerInfo("/", req)
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("root container stats: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// containerStats serves /stats/<namespace>/<pod>/<uid>/<container> and the
// classic /stats/<pod>_<namespace>/<container>.
func (s *Server) containerStats(w http.ResponseWriter, r *http.Request, p map[string]string) {
	if !s.statsAvailable(w) {
		return
	}
	ns, pod, uid := p["namespace"], p["pod"], p["uid"]
	if full := p["podFullName"]; full != "" {
		i := strings.LastIndex(full, "_")
		if i <= 0 {
			writeError(w, http.StatusNotFound, fmt.Sprintf("%q is not <pod>_<namespace>", full))
			return
		}
		pod, ns = full[:i], full[i+1:]
	}
	ref, err := s.View.FindContainer(ns, pod, uid, p["container"], false)
	if err != nil {
		writeLookupError(w, err)
		return
	}
	req, err := infoRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	info, err := s.Stats.DockerContainer(ref.ID, req)
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("stats of container %s in pod %s/%s: %v", p["container"], ns, pod, err))
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func writeLookupError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	writeError(w, http.StatusInternalServerError, err.Error())
}

// summary serves the Kubernetes summary API: node and pods, with CPU,
// memory and network from cAdvisor and the node file system from statfs.
// Per-container rootfs and log usage are omitted: they need disk walks.
func (s *Server) summary(w http.ResponseWriter, _ *http.Request, _ map[string]string) {
	if !s.statsAvailable(w) {
		return
	}
	out, err := s.buildSummary()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// buildSummary gathers the summary from cAdvisor's latest samples.
func (s *Server) buildSummary() (*statsapi.Summary, error) {
	req := &cadvisorapi.ContainerInfoRequest{NumStats: 2}
	root, err := s.Stats.ContainerInfo("/", req)
	if err != nil {
		return nil, fmt.Errorf("root container stats: %w", err)
	}
	disk := s.diskStats()
	out := statsapi.Summary{Node: statsapi.NodeStats{
		NodeName:         s.opts.NodeName,
		StartTime:        metav1.NewTime(root.Spec.CreationTime),
		CPU:              cpuStats(root.Stats),
		Memory:           memoryStats(root.Stats),
		Network:          networkStats(root.Stats),
		Fs:               fsStats(s.opts.RootDir),
		SystemContainers: systemContainers(),
	}, Pods: []statsapi.PodStats{}}
	if pods := s.podsContainer(); pods != nil {
		out.Node.SystemContainers = append(out.Node.SystemContainers, *pods)
	}
	var runtimeFs *statsapi.FsStats // the file system of Docker's root: images, writable layers, logs
	if disk != nil {
		runtimeFs = fsStats(disk.Runtime.RootDir)
		out.Node.Runtime = &statsapi.RuntimeStats{ImageFs: usedOn(runtimeFs, disk.Taken, disk.Runtime.Images)}
	}
	for _, pod := range s.View.GetPods() {
		out.Pods = append(out.Pods, s.podStats(pod, disk, runtimeFs, req.NumStats))
	}
	return &out, nil
}

// podStats are a pod's stats from the last n samples: its network (the
// sandbox's), its running containers', its cpu and memory (the pod
// cgroup's where there is one, else its containers' sums) and what it
// holds on the node's disk (disk: nil when not measured yet).
func (s *Server) podStats(pod *v1.Pod, disk *diskusage.Stats, runtimeFs *statsapi.FsStats, n int) statsapi.PodStats {
	ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}}
	if pod.Status.StartTime != nil {
		ps.StartTime = *pod.Status.StartTime
	}
	var ephemeral int64 // what the pod holds on the node's disk: layers, logs, volumes
	if infra, err := s.View.FindContainer(pod.Namespace, pod.Name, "", "POD", false); err == nil && infra.Running {
		if samples, err := s.Stats.Recent(infra.ID, true, n); err == nil {
			ps.Network = networkStats(samples)
		}
		if disk != nil {
			ephemeral += disk.Runtime.Writable[infra.ID] + disk.Logs[infra.ID]
		}
	}
	var used int64
	ps.Containers, used = s.containerSummaries(pod, disk, runtimeFs, n)
	ephemeral += used
	ps.CPU, ps.Memory = sumContainers(ps.Containers)
	// The pod cgroup, where there is one, holds the pod's true totals:
	// the infra container's and exited containers' share included.
	if path := s.Host.PodCgroupPath(pod); path != "" {
		if samples, err := s.Stats.Recent(path, false, n); err == nil && len(samples) > 0 {
			ps.CPU, ps.Memory = cpuStats(samples), memoryStats(samples)
		}
	}
	if disk != nil {
		ephemeral += disk.Volumes[pod.UID]
		ps.EphemeralStorage = usedOn(fsStats(s.opts.RootDir), disk.Taken, ephemeral)
	}
	ps.VolumeStats = s.claimStats(pod)
	return ps
}

// csiStatsTimeout bounds a CSI driver's answer to NodeGetVolumeStats: a
// request for stats does not wait longer for a slow driver.
const csiStatsTimeout = 5 * time.Second

// claimStats are the file system stats of the pod's measured claims, as the
// kubelet reports a persistent volume (with its claim's reference).
func (s *Server) claimStats(pod *v1.Pod) []statsapi.VolumeStats {
	if s.Claims == nil {
		return nil
	}
	var out []statsapi.VolumeStats
	for _, c := range s.Claims.MeasuredClaims(pod) {
		var fs *statsapi.FsStats
		if c.Measure == nil {
			fs = fsStats(c.Path)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), csiStatsTimeout)
			var err error
			if fs, err = c.Measure(ctx); err != nil {
				klog.V(2).Infof("Pod %s/%s: %v", pod.Namespace, pod.Name, err)
			}
			cancel()
		}
		if fs != nil {
			out = append(out, statsapi.VolumeStats{Name: c.Volume, PVCRef: &statsapi.PVCReference{Name: c.Claim, Namespace: pod.Namespace}, FsStats: *fs})
		}
	}
	return out
}

// The kubelet's volume stats series, one per claim in use.
var volumeStatDescs = [...]*prometheus.Desc{
	prometheus.NewDesc("kubelet_volume_stats_capacity_bytes", "Capacity in bytes of the volume", []string{"namespace", "persistentvolumeclaim"}, nil),
	prometheus.NewDesc("kubelet_volume_stats_available_bytes", "Number of available bytes in the volume", []string{"namespace", "persistentvolumeclaim"}, nil),
	prometheus.NewDesc("kubelet_volume_stats_used_bytes", "Number of used bytes in the volume", []string{"namespace", "persistentvolumeclaim"}, nil),
	prometheus.NewDesc("kubelet_volume_stats_inodes", "Maximum number of inodes in the volume", []string{"namespace", "persistentvolumeclaim"}, nil),
	prometheus.NewDesc("kubelet_volume_stats_inodes_free", "Number of free inodes in the volume", []string{"namespace", "persistentvolumeclaim"}, nil),
	prometheus.NewDesc("kubelet_volume_stats_inodes_used", "Number of used inodes in the volume", []string{"namespace", "persistentvolumeclaim"}, nil),
}

// volumeStatsCollector measures the claims of the agent's pods at each
// scrape (a statfs each), once per claim however many pods mount it.
type volumeStatsCollector struct{ s *Server }

func (c volumeStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range volumeStatDescs {
		ch <- d
	}
}

func (c volumeStatsCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[statsapi.PVCReference]bool{}
	for _, pod := range c.s.View.GetPods() {
		for _, vs := range c.s.claimStats(pod) {
			if seen[*vs.PVCRef] {
				continue
			}
			seen[*vs.PVCRef] = true
			for i, v := range []*uint64{vs.CapacityBytes, vs.AvailableBytes, vs.UsedBytes, vs.Inodes, vs.InodesFree, vs.InodesUsed} {
				ch <- prometheus.MustNewConstMetric(volumeStatDescs[i], prometheus.GaugeValue, float64(deref(v)), vs.PVCRef.Namespace, vs.PVCRef.Name)
			}
		}
	}
}

// containerSummaries are the stats of the pod's running containers, and
// the bytes their writable layers and logs hold.
func (s *Server) containerSummaries(pod *v1.Pod, disk *diskusage.Stats, runtimeFs *statsapi.FsStats, n int) ([]statsapi.ContainerStats, int64) {
	var out []statsapi.ContainerStats
	var ephemeral int64
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil {
			continue
		}
		id := strings.TrimPrefix(cs.ContainerID, "docker://")
		samples, err := s.Stats.Recent(id, true, n)
		if err != nil {
			continue
		}
		c := statsapi.ContainerStats{Name: cs.Name, StartTime: cs.State.Running.StartedAt,
			CPU: cpuStats(samples), Memory: memoryStats(samples)}
		if disk != nil {
			rootfs, logs := disk.Runtime.Writable[id], disk.Logs[id]
			c.Rootfs, c.Logs = usedOn(runtimeFs, disk.Taken, rootfs), usedOn(runtimeFs, disk.Taken, logs)
			ephemeral += rootfs + logs
		}
		out = append(out, c)
	}
	return out, ephemeral
}

// sumContainers is the pod's cpu and memory as its containers' sums, at
// the latest of their samples (nil if none has both).
func sumContainers(containers []statsapi.ContainerStats) (*statsapi.CPUStats, *statsapi.MemoryStats) {
	var cpuTotal, cpuRate, mem, ws, rss uint64
	var have bool
	var latest metav1.Time
	for _, c := range containers {
		if c.CPU == nil || c.Memory == nil {
			continue
		}
		have = true
		if c.CPU.Time.After(latest.Time) {
			latest = c.CPU.Time
		}
		cpuTotal += deref(c.CPU.UsageCoreNanoSeconds)
		cpuRate += deref(c.CPU.UsageNanoCores)
		mem += deref(c.Memory.UsageBytes)
		ws += deref(c.Memory.WorkingSetBytes)
		rss += deref(c.Memory.RSSBytes)
	}
	if !have {
		return nil, nil
	}
	return &statsapi.CPUStats{Time: latest, UsageCoreNanoSeconds: &cpuTotal, UsageNanoCores: &cpuRate},
		&statsapi.MemoryStats{Time: latest, UsageBytes: &mem, WorkingSetBytes: &ws, RSSBytes: &rss}
}

// podsContainer is the "pods" system container, as the kubelet reports it:
// the stats of the cgroup that holds every pod, its available memory
// counted against that cgroup's limit (node allocatable, where it is
// enforced), which is what the kubelet's allocatable eviction reads.
func (s *Server) podsContainer() *statsapi.ContainerStats {
	path := s.Host.PodsCgroupPath()
	if path == "" {
		return nil
	}
	info, err := s.Stats.ContainerInfo(path, &cadvisorapi.ContainerInfoRequest{NumStats: 2})
	if err != nil || len(info.Stats) == 0 {
		return nil
	}
	c := &statsapi.ContainerStats{Name: statsapi.SystemContainerPods, StartTime: metav1.NewTime(info.Spec.CreationTime),
		CPU: cpuStats(info.Stats), Memory: memoryStats(info.Stats)}
	if limit := info.Spec.Memory.Limit; info.Spec.HasMemory && limit > 0 && limit < unlimitedMemory {
		ws := deref(c.Memory.WorkingSetBytes)
		avail := uint64(0)
		if limit > ws {
			avail = limit - ws
		}
		c.Memory.AvailableBytes = &avail
	}
	return c
}

// unlimitedMemory is the least memory limit cgroup v1 reports for a cgroup
// without one (a page-rounded 2^63-1); cgroup v2's "max" reads as 2^64-1.
const unlimitedMemory = uint64(1) << 62

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// cpuStats is the latest cumulative usage and the rate between the last two
// samples.
func cpuStats(samples []*cadvisorapi.ContainerStats) *statsapi.CPUStats {
	if len(samples) == 0 {
		return nil
	}
	last := samples[len(samples)-1]
	total := last.Cpu.Usage.Total
	st := &statsapi.CPUStats{Time: metav1.NewTime(last.Timestamp), UsageCoreNanoSeconds: &total}
	if len(samples) > 1 {
		prev := samples[len(samples)-2]
		if dt := last.Timestamp.Sub(prev.Timestamp); dt > 0 && last.Cpu.Usage.Total >= prev.Cpu.Usage.Total {
			rate := uint64(float64(last.Cpu.Usage.Total-prev.Cpu.Usage.Total) / dt.Seconds())
			st.UsageNanoCores = &rate
		}
	}
	return st
}

func memoryStats(samples []*cadvisorapi.ContainerStats) *statsapi.MemoryStats {
	if len(samples) == 0 {
		return nil
	}
	last := samples[len(samples)-1]
	m := last.Memory
	usage, ws, rss := m.Usage, m.WorkingSet, m.RSS
	pf, majpf := m.ContainerData.Pgfault, m.ContainerData.Pgmajfault
	return &statsapi.MemoryStats{Time: metav1.NewTime(last.Timestamp), UsageBytes: &usage, WorkingSetBytes: &ws,
		RSSBytes: &rss, PageFaults: &pf, MajorPageFaults: &majpf}
}

func networkStats(samples []*cadvisorapi.ContainerStats) *statsapi.NetworkStats {
	if len(samples) == 0 {
		return nil
	}
	last := samples[len(samples)-1]
	ns := &statsapi.NetworkStats{Time: metav1.NewTime(last.Timestamp)}
	for _, i := range last.Network.Interfaces {
		rx, rxErr, tx, txErr := i.RxBytes, i.RxErrors, i.TxBytes, i.TxErrors
		is := statsapi.InterfaceStats{Name: i.Name, RxBytes: &rx, RxErrors: &rxErr, TxBytes: &tx, TxErrors: &txErr}
		ns.Interfaces = append(ns.Interfaces, is)
		if i.Name == "eth0" || ns.Name == "" {
			ns.InterfaceStats = is
		}
	}
	return ns
}

// usedOn is the usage of something on file system fs (nil: unknown), as
// measured at taken.
func usedOn(fs *statsapi.FsStats, taken time.Time, used int64) *statsapi.FsStats {
	u := uint64(max(used, 0))
	st := &statsapi.FsStats{Time: metav1.NewTime(taken), UsedBytes: &u}
	if fs != nil {
		st.AvailableBytes, st.CapacityBytes, st.Inodes, st.InodesFree = fs.AvailableBytes, fs.CapacityBytes, fs.Inodes, fs.InodesFree
	}
	return st
}

// fsStats is the node file system holding dir, from statfs.
func fsStats(dir string) *statsapi.FsStats {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil
	}
	bsize := uint64(st.Bsize)
	capacity, avail := st.Blocks*bsize, st.Bavail*bsize
	used := capacity - st.Bfree*bsize
	inodes, free := st.Files, st.Ffree
	usedInodes := inodes - free
	return &statsapi.FsStats{Time: metav1.NewTime(time.Now()), CapacityBytes: &capacity, AvailableBytes: &avail,
		UsedBytes: &used, Inodes: &inodes, InodesFree: &free, InodesUsed: &usedInodes}
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	if s.Metrics == nil {
		writeError(w, http.StatusServiceUnavailable, "metrics are unavailable")
		return
	}
	promhttp.HandlerFor(s.allMetrics, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

func (s *Server) cadvisorMetrics(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	if !s.statsAvailable(w) {
		return
	}
	if s.CadvisorMetrics == nil {
		writeError(w, http.StatusServiceUnavailable, "container metrics are unavailable")
		return
	}
	promhttp.HandlerFor(ownContainers{s.CadvisorMetrics, s.hostNetworkPods, s.diskStats()}, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// diskStats is the last disk usage measurement (nil before the first, or
// without a measurement).
func (s *Server) diskStats() *diskusage.Stats {
	if s.DiskUsage == nil {
		return nil
	}
	return s.DiskUsage.Last()
}

// hostNetworkPods are the namespace/name of the desired pods on the host's
// network.
func (s *Server) hostNetworkPods() map[string]bool {
	out := map[string]bool{}
	for _, p := range s.View.GetPods() {
		if p.Spec.HostNetwork {
			out[p.Namespace+"/"+p.Name] = true
		}
	}
	return out
}

// ownContainers gathers cAdvisor's series of the node (its root cgroup and
// machine) and of this agent's containers only, as the kubelet serves them:
// the network series of a pod are its infra container's (every container
// of a pod shares its network namespace, so each would report the same
// traffic), and a pod on the host's network has none (they would be the
// host's).
//
// cAdvisor reports no file system usage on this storage driver: the
// writable layer and log usage of the agent's own measurement (disk, nil
// before the first) is added as container_fs_usage_bytes, labelled as the
// container's other series.
type ownContainers struct {
	g           prometheus.Gatherer
	hostNetwork func() map[string]bool
	disk        *diskusage.Stats
}

func (o ownContainers) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := o.g.Gather()
	hostNet := o.hostNetwork()
	out := mfs[:0]
	for _, mf := range mfs {
		network := strings.HasPrefix(mf.GetName(), "container_network_")
		kept := mf.Metric[:0]
		for _, m := range mf.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			id, perContainer := l["id"]
			switch {
			case !perContainer || id == "/":
			case l["pod"] == "":
				continue // another owner's container
			case network && (l["container"] != kubecontainer.InfraContainerName || hostNet[l["namespace"]+"/"+l["pod"]]):
				continue
			}
			kept = append(kept, m)
		}
		if len(kept) > 0 {
			mf.Metric = kept
			out = append(out, mf)
		}
	}
	if fs := o.fsUsage(out); fs != nil {
		out = append(out, fs)
	}
	return out, err
}

// fsUsage is container_fs_usage_bytes of each container with a measured
// disk usage, labelled as its container_last_seen series.
func (o ownContainers) fsUsage(families []*dto.MetricFamily) *dto.MetricFamily {
	if o.disk == nil {
		return nil
	}
	ms := []*dto.Metric{}
	stamp := o.disk.Taken.UnixMilli()
	for _, mf := range families {
		if mf.GetName() != "container_last_seen" {
			continue
		}
		for _, m := range mf.Metric {
			var id string
			for _, l := range m.Label {
				if l.GetName() == "id" {
					id = path.Base(l.GetValue())
				}
			}
			used, ok := o.disk.Runtime.Writable[id]
			if !ok {
				continue
			}
			v := float64(used + o.disk.Logs[id])
			ms = append(ms, &dto.Metric{Label: m.Label, Gauge: &dto.Gauge{Value: &v}, TimestampMs: &stamp})
		}
	}
	if len(ms) == 0 {
		return nil
	}
	name, help, typ := "container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", dto.MetricType_GAUGE
	return &dto.MetricFamily{Name: &name, Help: &help, Type: &typ, Metric: ms}
}

var _ prometheus.Gatherer = (*prometheus.Registry)(nil)
