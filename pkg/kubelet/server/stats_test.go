package server

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/diskusage"
)

// fakeStats is a cAdvisor with two samples per container, a second apart.
type fakeStats struct{}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func samples(cpuA, cpuB uint64, mem uint64) []*cadvisorapi.ContainerStats {
	mk := func(t time.Time, cpu uint64) *cadvisorapi.ContainerStats {
		s := &cadvisorapi.ContainerStats{Timestamp: t}
		s.Cpu.Usage.Total = cpu
		s.Memory.Usage, s.Memory.WorkingSet, s.Memory.RSS = mem, mem/2, mem/4
		s.Network.Interfaces = []cadvisorapi.InterfaceStats{{Name: "eth0", RxBytes: 100, TxBytes: 200}}
		return s
	}
	return []*cadvisorapi.ContainerStats{mk(t0, cpuA), mk(t0.Add(time.Second), cpuB)}
}

func (fakeStats) Err() error { return nil }

// failedStats is a cAdvisor that could not start.
type failedStats struct{ err error }

func (f failedStats) Err() error                                     { return f.err }
func (f failedStats) MachineInfo() (*cadvisorapi.MachineInfo, error) { return nil, f.err }
func (f failedStats) ContainerInfo(string, *cadvisorapi.ContainerInfoRequest) (*cadvisorapi.ContainerInfo, error) {
	return nil, f.err
}
func (f failedStats) DockerContainer(string, *cadvisorapi.ContainerInfoRequest) (cadvisorapi.ContainerInfo, error) {
	return cadvisorapi.ContainerInfo{}, f.err
}
func (f failedStats) Recent(string, bool, int) ([]*cadvisorapi.ContainerStats, error) {
	return nil, f.err
}

func (fakeStats) MachineInfo() (*cadvisorapi.MachineInfo, error) {
	return &cadvisorapi.MachineInfo{NumCores: 2, MemoryCapacity: 1 << 30}, nil
}
func (fakeStats) ContainerInfo(name string, _ *cadvisorapi.ContainerInfoRequest) (*cadvisorapi.ContainerInfo, error) {
	spec := cadvisorapi.ContainerSpec{CreationTime: t0}
	if name == "/kubepods" { // sized to node allocatable: 3 MiB
		spec.HasMemory, spec.Memory.Limit = true, 3<<20
	}
	return &cadvisorapi.ContainerInfo{ContainerReference: cadvisorapi.ContainerReference{Name: name},
		Spec: spec, Stats: samples(1e9, 2e9, 1<<20)}, nil
}
func (fakeStats) DockerContainer(id string, _ *cadvisorapi.ContainerInfoRequest) (cadvisorapi.ContainerInfo, error) {
	if id != "abc" && id != "infra" {
		return cadvisorapi.ContainerInfo{}, errors.New("unknown container")
	}
	return cadvisorapi.ContainerInfo{ContainerReference: cadvisorapi.ContainerReference{Name: "/docker/" + id},
		Stats: samples(5e8, 7.5e8, 4<<20)}, nil
}

func (f fakeStats) Recent(name string, docker bool, _ int) ([]*cadvisorapi.ContainerStats, error) {
	if docker {
		ci, err := f.DockerContainer(name, nil)
		return ci.Stats, err
	}
	ci, err := f.ContainerInfo(name, nil)
	return ci.Stats, err
}

func TestStatsHandlersGolden(t *testing.T) {
	start := metav1.NewTime(t0)
	local := webPods(v1.PodStatus{StartTime: &start, ContainerStatuses: []v1.ContainerStatus{{Name: "server", ContainerID: "docker://abc",
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: start}}}}})
	host := &fakeHost{podsCgroup: "/kubepods"}
	// A disk measurement: the pod's layers and logs, its volumes, images.
	rootDir := t.TempDir()
	disk := &diskusage.Stats{Taken: t0, Runtime: &kubecontainer.DiskUsage{Writable: map[string]int64{"abc": 1000, "infra": 10},
		Images: 5 << 20, RootDir: rootDir}, Logs: map[string]int64{"abc": 200}, Volumes: map[types.UID]int64{"u1": 3000}}
	s := New(Deps{Host: host, View: local.view(), DiskUsage: fakeDisk{disk}, Runtime: fakeRuntime{}, Sources: fakeSources{}, Stats: fakeStats{}}, Options{NodeName: "n", RootDir: rootDir})
	srv := httptest.NewServer(s.Handler(true))
	defer srv.Close()
	for path, golden := range map[string]string{
		"/spec":                        "spec.json",
		"/stats/":                      "stats-root.json",
		"/stats/default/web/u1/server": "stats-container.json",
		"/stats/web_default/server":    "stats-container.json",
	} {
		resp, body := do(t, "GET", srv.URL+path, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		checkGolden(t, golden, body)
	}
	resp, body := do(t, "GET", srv.URL+"/stats/summary", "")
	if resp.StatusCode != 200 {
		t.Fatalf("summary: %d %s", resp.StatusCode, body)
	}
	// What comes from the host (statfs of a temporary directory, the test
	// process as the agent's system container) is checked, then dropped
	// before comparing with the golden file.
	var sum statsapi.Summary
	if err := json.Unmarshal([]byte(body), &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Node.SystemContainers) == 0 || sum.Node.SystemContainers[0].Name != "kubelet" ||
		*sum.Node.SystemContainers[0].CPU.UsageCoreNanoSeconds == 0 || *sum.Node.SystemContainers[0].Memory.RSSBytes == 0 {
		t.Errorf("system containers: %+v", sum.Node.SystemContainers)
	}
	// The "pods" system container: kubepods, its memory available against
	// its limit (3 MiB less a working set of 512 KiB).
	var pods *statsapi.ContainerStats
	for i := range sum.Node.SystemContainers {
		if sum.Node.SystemContainers[i].Name == statsapi.SystemContainerPods {
			pods = &sum.Node.SystemContainers[i]
		}
	}
	if pods == nil || pods.Memory == nil || pods.Memory.AvailableBytes == nil || *pods.Memory.AvailableBytes != 3<<20-1<<19 ||
		pods.CPU == nil || *pods.CPU.UsageNanoCores != 1e9 {
		t.Errorf("pods system container: %+v", pods)
	}
	if sum.Node.Fs == nil || *sum.Node.Fs.CapacityBytes == 0 || *sum.Node.Runtime.ImageFs.CapacityBytes == 0 {
		t.Errorf("node file systems without capacity: %s", body)
	}
	sum.Node.SystemContainers, sum.Node.Fs = nil, nil
	for _, fs := range []*statsapi.FsStats{sum.Node.Runtime.ImageFs, sum.Pods[0].EphemeralStorage, sum.Pods[0].Containers[0].Rootfs, sum.Pods[0].Containers[0].Logs} {
		fs.AvailableBytes, fs.CapacityBytes, fs.Inodes, fs.InodesFree = nil, nil, nil, nil
	}
	data, _ := json.MarshalIndent(sum, "", "  ")
	body = string(data) + "\n"
	checkGolden(t, "summary.json", body)
	if !strings.Contains(body, `"usageNanoCores": 250000000`) {
		t.Errorf("summary lacks the CPU rate between the two samples: %s", body)
	}
	if resp, _ := do(t, "GET", srv.URL+"/stats/default/web/u1/nope", ""); resp.StatusCode != 404 {
		t.Errorf("stats of an unknown container: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", srv.URL+"/stats/?num_stats=x", ""); resp.StatusCode != 400 {
		t.Errorf("bad num_stats: %d", resp.StatusCode)
	}
}

func checkGolden(t *testing.T, name, body string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		_ = os.WriteFile(path, []byte(body), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(want) != body {
		t.Errorf("%s differs from its golden file:\n%s", name, body)
	}
}
