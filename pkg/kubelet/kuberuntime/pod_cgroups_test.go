package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
)

// On a fake v1 hierarchy: pod cgroups get --pod-max-pids, kubepods the
// node allocatable limits, written once. The fake has no kernel files: an
// unbounded pids.max is then not written, as on a host without the pids
// controller (a pod cgroup must not fail for want of it).
func TestPodAndNodeCgroupLimits(t *testing.T) {
	for _, c := range []struct {
		name                                 string
		podMaxPids                           int64
		limits                               v1.ResourceList
		wantPodPids                          string
		wantShares, wantMemory, wantPodsPids string
	}{
		{"unbounded", -1, nil, "", "", "", ""},
		{"bounded", 100, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("1Gi"), PidResource: resource.MustParse("4000")},
			"100", "1536", "1073741824", "4000"},
		{"no pid limit for kubepods", 0, v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("8Gi")},
			"", "2048", "8589934592", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mount := t.TempDir()
			for _, s := range []string{"cpu", "cpuacct", "memory", "pids"} {
				if err := os.Mkdir(filepath.Join(mount, s), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cg, err := cgroups.New(cgroups.Config{Mount: mount, Driver: cgroups.DriverCgroupfs})
			if err != nil {
				t.Fatal(err)
			}
			m := &Manager{cfg: Config{Cgroups: cg, PodMaxPids: c.podMaxPids, PodsLimits: c.limits, Clock: clock.RealClock{}}}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
			if err := m.ensurePodCgroup(pod); err != nil {
				t.Fatal(err)
			}
			read := func(file string) string {
				data, _ := os.ReadFile(filepath.Join(mount, file))
				return strings.TrimSpace(string(data))
			}
			if got := read("pids/kubepods/besteffort/podu1/pids.max"); got != c.wantPodPids {
				t.Errorf("pod pids.max %q, want %q", got, c.wantPodPids)
			}
			m.UpdateQoSCgroups(nil)
			for file, want := range map[string]string{"cpu/kubepods/cpu.shares": c.wantShares,
				"memory/kubepods/memory.limit_in_bytes": c.wantMemory, "pids/kubepods/pids.max": c.wantPodsPids} {
				if got := read(file); got != want {
					t.Errorf("%s = %q, want %q", file, got, want)
				}
			}
			// Written once: housekeeping does not rewrite what it set.
			os.Remove(filepath.Join(mount, "memory/kubepods/memory.limit_in_bytes"))
			m.UpdateQoSCgroups(nil)
			if got := read("memory/kubepods/memory.limit_in_bytes"); got != "" {
				t.Errorf("kubepods rewritten on every round: %q", got)
			}
		})
	}
}
