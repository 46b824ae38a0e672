package kuberuntime

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
)

// fakeCgroups records what is asked of the cgroups; the cgroups named in
// exists exist, and Ensure of a cgroup in fail fails.
type fakeCgroups struct {
	exists  map[string]bool
	fail    map[string]error
	removed []string
	ensured []string
	res     map[string]cgroups.Resources
	usage   map[string]int64 // memory in use, by cgroup name or "<name>/<container ID>"
}

func newFakeCgroups() *fakeCgroups {
	return &fakeCgroups{exists: map[string]bool{}, fail: map[string]error{}, res: map[string]cgroups.Resources{}}
}

func cgName(n cgroups.Name) string { return strings.Join(n, "/") }

func (f *fakeCgroups) Ensure(n cgroups.Name, r cgroups.Resources) error {
	f.ensured = append(f.ensured, cgName(n))
	if err := f.fail[cgName(n)]; err != nil {
		return err
	}
	f.exists[cgName(n)], f.res[cgName(n)] = true, r
	return nil
}

func (f *fakeCgroups) Remove(n cgroups.Name) error {
	if err := f.fail["remove "+cgName(n)]; err != nil {
		return err
	}
	f.removed = append(f.removed, cgName(n))
	delete(f.exists, cgName(n))
	return nil
}

func (f *fakeCgroups) MemoryWorkingSet(n cgroups.Name, id string) (int64, error) {
	key := cgName(n)
	if id != "" {
		key += "/" + id
	}
	return f.usage[key], nil
}

func (f *fakeCgroups) Exists(n cgroups.Name) bool          { return f.exists[cgName(n)] }
func (f *fakeCgroups) RuntimeParent(n cgroups.Name) string { return "/" + cgName(n) }
func (f *fakeCgroups) Path(n cgroups.Name) string          { return "/sys/fs/cgroup/" + cgName(n) }

func burstablePod(uid, cpu string) *v1.Pod {
	p := containertest.Pod(v1.RestartPolicyAlways, "a")
	p.UID = types.UID("u-" + uid)
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	return p
}

// Without a cgroup manager the pod cgroup calls do nothing; with one, the
// pod's cgroup is found under its QoS class, made with --pod-max-pids, and
// removed wherever a class put it.
func TestPodCgroupPaths(t *testing.T) {
	pod := containertest.Pod(v1.RestartPolicyAlways, "a") // BestEffort
	t.Run("none", func(t *testing.T) {
		m := newTestManager(t, Config{}, nil)
		if m.cgroupParent(pod) != "" || m.PodCgroupPath(pod) != "" || m.PodsCgroupPath() != "" || m.ensurePodCgroup(pod) != nil || m.RemovePodCgroup(pod.UID) != nil {
			t.Error("a manager without cgroups used some")
		}
		m.UpdateQoSCgroups([]*v1.Pod{pod}) // must not panic
	})
	t.Run("managed", func(t *testing.T) {
		cg := newFakeCgroups()
		m := newTestManager(t, Config{Cgroups: cg, PodMaxPids: 50}, nil)
		if got := m.cgroupParent(pod); got != "/kubepods/besteffort/poduid1" {
			t.Errorf("parent %q", got)
		}
		if m.PodCgroupPath(pod) != "" || m.PodsCgroupPath() != "" {
			t.Error("paths of cgroups that do not exist")
		}
		if err := m.ensurePodCgroup(pod); err != nil {
			t.Fatal(err)
		}
		if r := cg.res["kubepods/besteffort/poduid1"]; r.Pids != 50 || r.CPUShares != minShares {
			t.Errorf("pod cgroup %+v, want %d pids and the minimum shares", r, 50)
		}
		if got := m.PodCgroupPath(pod); got != "/sys/fs/cgroup/kubepods/besteffort/poduid1" {
			t.Errorf("pod cgroup path %q", got)
		}
		cg.exists["kubepods"] = true
		if got := m.PodsCgroupPath(); got != "/sys/fs/cgroup/kubepods" {
			t.Errorf("pods cgroup path %q", got)
		}
		// The pod moved class: both its cgroups go.
		cg.exists["kubepods/burstable/poduid1"] = true
		if err := m.RemovePodCgroup(pod.UID); err != nil {
			t.Fatal(err)
		}
		if want := []string{"kubepods/burstable/poduid1", "kubepods/besteffort/poduid1"}; !slices.Equal(cg.removed, want) {
			t.Errorf("removed %v, want %v", cg.removed, want)
		}
		cg.exists["kubepods/poduid1"] = true
		cg.fail["remove kubepods/poduid1"] = errors.New("busy")
		if err := m.RemovePodCgroup(pod.UID); err == nil {
			t.Error("a failed removal was not reported")
		}
		cg.fail["kubepods/besteffort/poduid1"] = errors.New("no space")
		if err := m.ensurePodCgroup(pod); err == nil || !strings.Contains(err.Error(), "pod cgroup: no space") {
			t.Errorf("error %v", err)
		}
	})
}

// The QoS cgroups follow the desired pods' requests and are written only on
// a change; kubepods is sized once, and a failure is retried a minute later
// on the manager's clock.
func TestUpdateQoSCgroups(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	cg := newFakeCgroups()
	cg.fail["kubepods"] = errors.New("memory in use")
	m := newTestManager(t, Config{Cgroups: cg, Clock: clk, PodsLimits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}}, nil)
	steps := []struct {
		name    string
		advance time.Duration
		fix     bool
		pods    []*v1.Pod
		want    []string
		shares  uint64 // burstable's, when written
	}{
		{"first: kubepods fails, QoS written", 0, false, []*v1.Pod{burstablePod("1", "500m")},
			[]string{"kubepods", "kubepods/burstable", "kubepods/besteffort"}, 512},
		{"no change: nothing written, kubepods not retried yet", 30 * time.Second, true, []*v1.Pod{burstablePod("1", "500m")}, nil, 0},
		{"a minute on: kubepods retried and sized", 30 * time.Second, false, []*v1.Pod{burstablePod("1", "500m")}, []string{"kubepods"}, 0},
		{"another burstable pod: shares summed", time.Hour, false, []*v1.Pod{burstablePod("1", "500m"), burstablePod("2", "1"), containertest.Pod(v1.RestartPolicyAlways, "b")},
			[]string{"kubepods/burstable", "kubepods/besteffort"}, 1536},
		{"no burstable pods: the minimum", 0, false, nil, []string{"kubepods/burstable", "kubepods/besteffort"}, minShares},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		if s.fix {
			delete(cg.fail, "kubepods")
		}
		cg.ensured = nil
		m.UpdateQoSCgroups(s.pods)
		if !slices.Equal(cg.ensured, s.want) {
			t.Fatalf("%s: wrote %v, want %v", s.name, cg.ensured, s.want)
		}
		if s.shares != 0 {
			if got := cg.res["kubepods/burstable"].CPUShares; got != s.shares {
				t.Errorf("%s: burstable shares %d, want %d", s.name, got, s.shares)
			}
			if got := cg.res["kubepods/besteffort"].CPUShares; got != minShares {
				t.Errorf("%s: besteffort shares %d", s.name, got)
			}
		}
	}
	if r := cg.res["kubepods"]; r.CPUShares != 2048 || r.Memory != 1<<30 {
		t.Errorf("kubepods %+v", r)
	}
	// A failed QoS write is tried again at the next call.
	cg.fail["kubepods/burstable"] = errors.New("eio")
	pods := []*v1.Pod{burstablePod("1", "250m")}
	m.UpdateQoSCgroups(pods)
	delete(cg.fail, "kubepods/burstable")
	cg.ensured = nil
	m.UpdateQoSCgroups(pods)
	if want := []string{"kubepods/burstable", "kubepods/besteffort"}; !slices.Equal(cg.ensured, want) {
		t.Errorf("after a failed write: %v, want %v", cg.ensured, want)
	}
}
