package allocation

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// guaranteed is pod with its requests (both given) as its limits.
func guaranteed(uid, cpu, mem string) *v1.Pod {
	p := pod(uid, cpu, mem)
	p.Spec.Containers[0].Resources.Limits = p.Spec.Containers[0].Resources.Requests.DeepCopy()
	return p
}

func withPriority(p *v1.Pod, prio int32) *v1.Pod {
	p.Spec.Priority = &prio
	return p
}

func cpuShort(milli int64) Shortfall {
	return Shortfall{Resource: v1.ResourceCPU, Requested: milli, Used: 0, Capacity: 0}
}

// A critical pod preempts the fewest and least important pods that free
// what it lacks, as the kubelet's critical-pod admission handler chooses
// them.
func TestPreempt(t *testing.T) {
	memShort := Shortfall{Resource: v1.ResourceMemory, Requested: 1 << 30}
	for _, tc := range []struct {
		name       string
		short      []Shortfall
		candidates []*v1.Pod
		critical   map[string]bool // candidates that may not be preempted
		want       []string        // the victims, in order
		err        string
	}{
		{"burstable before guaranteed; BestEffort frees nothing", []Shortfall{cpuShort(500)},
			[]*v1.Pod{guaranteed("g", "1", "1Gi"), pod("b", "1", ""), pod("e", "", "")}, nil, []string{"b"}, ""},
		{"the pod closest to the need", []Shortfall{cpuShort(500)},
			[]*v1.Pod{pod("b1", "200m", ""), pod("b2", "1", ""), pod("b3", "600m", "")}, nil, []string{"b3"}, ""},
		{"on a tie the smaller request, memory first", []Shortfall{cpuShort(500)},
			[]*v1.Pod{pod("b1", "500m", "2Gi"), pod("b2", "500m", "1Gi"), pod("b3", "1", "1Gi")}, nil, []string{"b2"}, ""},
		{"on a full tie the later admitted", []Shortfall{cpuShort(500)},
			[]*v1.Pod{pod("b1", "300m", ""), pod("b2", "300m", "")}, nil, []string{"b2", "b1"}, ""},
		{"guaranteed pods only as far as the others fall short", []Shortfall{cpuShort(500)},
			[]*v1.Pod{guaranteed("g1", "400m", "1Gi"), guaranteed("g2", "2", "1Gi"), pod("b", "300m", "")}, nil, []string{"b", "g1"}, ""},
		{"two resources: the pod that frees both", []Shortfall{cpuShort(500), memShort},
			[]*v1.Pod{pod("x", "500m", ""), pod("y", "", "1Gi"), pod("z", "500m", "1Gi")}, nil, []string{"z"}, ""},
		{"two resources: two pods, the smaller first", []Shortfall{cpuShort(500), memShort},
			[]*v1.Pod{pod("x", "500m", ""), pod("y", "", "1Gi")}, nil, []string{"x", "y"}, ""},
		{"critical pods are never preempted", []Shortfall{cpuShort(500)},
			[]*v1.Pod{pod("c", "1", ""), pod("b", "200m", "")}, map[string]bool{"c": true}, nil,
			"no set of running pods found to reclaim resources: [(res: cpu, q: 300), ]"},
		{"nothing to preempt", []Shortfall{cpuShort(500), memShort}, nil, nil, nil,
			"no set of running pods found to reclaim resources: [(res: cpu, q: 500), (res: memory, q: 1073741824), ]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Preempt(tc.short, tc.candidates, func(v *v1.Pod) bool { return !tc.critical[v.Name] })
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("Preempt error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("victims %v, want %v", names, tc.want)
			}
		})
	}
}

// The message of a critical pod preemption could not make room for is
// the kubelet's.
func TestUnexpectedAdmissionMessage(t *testing.T) {
	_, err := Preempt([]Shortfall{{Resource: v1.ResourceCPU, Requested: 1500, Used: 1000, Capacity: 2000}}, nil, nil)
	want := "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: " +
		"no set of running pods found to reclaim resources: [(res: cpu, q: 500), ]"
	if got := UnexpectedAdmissionMessage(err); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

// A critical pod preempts any pod that is not; otherwise only a higher
// priority preempts a lower one, both written.
func TestPreemptable(t *testing.T) {
	critical := func(p *v1.Pod) bool { return p.Spec.Priority != nil && *p.Spec.Priority >= SystemCriticalPriority }
	for _, tc := range []struct {
		name              string
		preemptor, victim *v1.Pod
		want              bool
	}{
		{"critical over none", withPriority(pod("c", "", ""), SystemCriticalPriority), pod("v", "", ""), true},
		{"critical over critical of lower priority", withPriority(pod("c", "", ""), SystemCriticalPriority+1000), withPriority(pod("v", "", ""), SystemCriticalPriority), true},
		{"critical over critical of the same priority", withPriority(pod("c", "", ""), SystemCriticalPriority), withPriority(pod("v", "", ""), SystemCriticalPriority), false},
		{"higher priority over lower", withPriority(pod("c", "", ""), 100), withPriority(pod("v", "", ""), 10), true},
		{"higher priority over none written", withPriority(pod("c", "", ""), 100), pod("v", "", ""), false},
		{"no priorities", pod("c", "", ""), pod("v", "", ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Preemptable(tc.preemptor, tc.victim, critical); got != tc.want {
				t.Errorf("Preemptable = %v, want %v", got, tc.want)
			}
		})
	}
}
