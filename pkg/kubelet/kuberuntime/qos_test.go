package kuberuntime

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestOOMScoreAdj(t *testing.T) {
	const gib = 1 << 30
	res := func(req, lim string) v1.ResourceRequirements {
		r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
		if req != "" {
			r.Requests[v1.ResourceMemory] = resource.MustParse(req)
		}
		if lim != "" {
			r.Limits[v1.ResourceMemory] = resource.MustParse(lim)
			r.Limits[v1.ResourceCPU] = resource.MustParse("1")
			r.Requests[v1.ResourceCPU] = resource.MustParse("1")
		}
		return r
	}
	cases := []struct {
		name     string
		res      v1.ResourceRequirements
		priority string
		want     int
	}{
		{"BestEffort", v1.ResourceRequirements{}, "", 1000},
		{"Guaranteed", res("1Gi", "1Gi"), "", -997},
		{"Burstable, a quarter of the node", res("1Gi", ""), "", 750},
		{"Burstable, all of the node: above Guaranteed", res("4Gi", ""), "", 3},
		{"Burstable, a tiny request: below BestEffort", res("1Ki", ""), "", 999},
		{"node-critical (kubeadm's control plane)", v1.ResourceRequirements{}, "system-node-critical", -997},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{PriorityClassName: c.priority, Containers: []v1.Container{{Name: "c", Resources: c.res}}}}
			if got := oomScoreAdj(pod, &pod.Spec.Containers[0], 4*gib); got != c.want {
				t.Errorf("oom_score_adj %d, want %d", got, c.want)
			}
		})
	}
}

// The agent lowers its own score to -999 but never raises one an operator
// set lower; a refused write is an error for the one warning.
func TestLowerOOMScoreAdj(t *testing.T) {
	for _, c := range []struct {
		name, cur, want string
	}{
		{"default", "0\n", "-999"},
		{"a BestEffort-like score", "500", "-999"},
		{"already the agent's", "-999", "-999"},
		{"operator's lower score kept", "-1000\n", "-1000\n"},
		{"unreadable garbage: written", "x", "-999"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "oom_score_adj")
			if err := os.WriteFile(path, []byte(c.cur), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := lowerOOMScoreAdj(path, agentOOMScoreAdj); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(path); string(got) != c.want {
				t.Errorf("oom_score_adj %q, want %q", got, c.want)
			}
		})
	}
	// The kernel refuses the write without CAP_SYS_RESOURCE; a directory
	// refuses it here.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "oom_score_adj"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := lowerOOMScoreAdj(filepath.Join(dir, "oom_score_adj"), agentOOMScoreAdj); err == nil {
		t.Error("a refused write gave no error")
	}
}
