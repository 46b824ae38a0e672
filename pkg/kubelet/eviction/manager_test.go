package eviction

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func mustThresholds(t *testing.T, f Flags) []Threshold {
	t.Helper()
	th, err := ParseThresholds(f)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

const mi = 1 << 20

func memObs(avail int64) Observations {
	return Observations{SignalMemoryAvailable: {Available: avail, Capacity: 1000 * mi}}
}

func TestObserveConditionsAndGrace(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m := NewManager(Config{
		Thresholds: mustThresholds(t, Flags{Hard: "memory.available<100Mi", Soft: "nodefs.available<20%",
			SoftGracePeriod: "nodefs.available=30s", MinimumReclaim: "memory.available=50Mi"}),
		PressureTransitionPeriod: time.Minute,
	}, clock)
	disk := func(avail int64) Observation { return Observation{Available: avail, Capacity: 100} }
	type step struct {
		advance time.Duration
		obs     Observations
		due     string // signals due, comma-joined
		conds   string
	}
	for i, s := range []step{
		{obs: Observations{SignalMemoryAvailable: {Available: 500 * mi, Capacity: 1000 * mi}, SignalNodeFsAvailable: disk(50)}, due: "", conds: "[]"},
		// Soft threshold met: pressure at once, no eviction before its grace.
		{advance: time.Second, obs: Observations{SignalMemoryAvailable: {Available: 500 * mi, Capacity: 1000 * mi}, SignalNodeFsAvailable: disk(10)}, due: "", conds: "[DiskPressure]"},
		{advance: 29 * time.Second, obs: Observations{SignalNodeFsAvailable: disk(10)}, due: "", conds: "[DiskPressure]"},
		{advance: time.Second, obs: Observations{SignalNodeFsAvailable: disk(10)}, due: "nodefs.available", conds: "[DiskPressure]"},
		// Hard memory threshold: due at once, memory first.
		{advance: time.Second, obs: Observations{SignalMemoryAvailable: {Available: 90 * mi, Capacity: 1000 * mi}, SignalNodeFsAvailable: disk(10)},
			due: "memory.available,nodefs.available", conds: "[MemoryPressure DiskPressure]"},
		// Above the threshold but not above it plus its minimum reclaim:
		// still being reclaimed. Disk recovered.
		{advance: time.Second, obs: Observations{SignalMemoryAvailable: {Available: 120 * mi, Capacity: 1000 * mi}, SignalNodeFsAvailable: disk(50)},
			due: "memory.available", conds: "[MemoryPressure DiskPressure]"},
		// Reclaimed; conditions stay for the transition period.
		{advance: time.Second, obs: Observations{SignalMemoryAvailable: {Available: 200 * mi, Capacity: 1000 * mi}, SignalNodeFsAvailable: disk(50)},
			due: "", conds: "[MemoryPressure DiskPressure]"},
		{advance: 59 * time.Second, obs: Observations{SignalMemoryAvailable: {Available: 200 * mi, Capacity: 1000 * mi}, SignalNodeFsAvailable: disk(50)},
			due: "", conds: "[MemoryPressure]"},
		{advance: 2 * time.Second, obs: Observations{SignalMemoryAvailable: {Available: 200 * mi, Capacity: 1000 * mi}, SignalNodeFsAvailable: disk(50)},
			due: "", conds: "[]"},
		// A soft threshold met again starts its grace anew.
		{advance: time.Second, obs: Observations{SignalNodeFsAvailable: disk(10)}, due: "", conds: "[DiskPressure]"},
	} {
		clock.Step(s.advance)
		var due []string
		for _, th := range m.Observe(s.obs) {
			due = append(due, string(th.Signal))
		}
		if got := strings.Join(due, ","); got != s.due {
			t.Errorf("step %d: due %q, want %q", i, got, s.due)
		}
		if got := fmt.Sprint(m.Conditions()); got != s.conds {
			t.Errorf("step %d: conditions %s, want %s", i, got, s.conds)
		}
	}
}

func pod(name string, opts ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func requests(mem string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(mem)}
	}
}

func priority(n int32) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.Priority = &n } }

func usage(p *v1.Pod, mem int64) PodUsage {
	return PodUsage{Pod: p, Known: true, Memory: mem, Disk: mem, Containers: []ContainerUsage{{Name: "c", Memory: mem, Disk: mem}}}
}

func TestPickRanking(t *testing.T) {
	hard := mustThresholds(t, Flags{Hard: "memory.available<100Mi"})[0]
	for _, tc := range []struct {
		name string
		pods []PodUsage
		want string
	}{
		{"over its request before under it",
			[]PodUsage{usage(pod("big-under", requests("900Mi")), 800*mi), usage(pod("small-over", requests("10Mi")), 20*mi)}, "small-over"},
		{"lower priority first among those over",
			[]PodUsage{usage(pod("low", priority(1)), 10*mi), usage(pod("high", priority(100)), 900*mi)}, "low"},
		{"most usage above request last decides",
			[]PodUsage{usage(pod("a", requests("100Mi")), 300*mi), usage(pod("b"), 250*mi)}, "b"},
		{"measured before unmeasured",
			[]PodUsage{{Pod: pod("unknown")}, usage(pod("measured"), 900*mi)}, "measured"},
		// Issue 49: a pod not measured yet, the hog and an idle bystander.
		{"the hog before an idle bystander and an unmeasured pod",
			[]PodUsage{{Pod: pod("just-started")}, usage(pod("bystander"), 173), usage(pod("hog"), 900*mi)}, "hog"},
		{"an unmeasured pod before none: the one left",
			[]PodUsage{{Pod: pod("unknown")}, usage(pod("critical", priority(systemCriticalPriority)), 900*mi)}, "unknown"},
		{"unmeasured pods among themselves: lower priority first",
			[]PodUsage{{Pod: pod("high", priority(100))}, {Pod: pod("low", priority(1))}}, "low"},
		{"critical never",
			[]PodUsage{usage(pod("node-critical", func(p *v1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }), 900*mi),
				usage(pod("cluster-critical", priority(systemCriticalPriority)), 900*mi), usage(pod("guaranteed", requests("1Gi")), 1*mi)}, "guaranteed"},
		{"only critical pods: none", []PodUsage{usage(pod("x", priority(2000001000)), 900*mi)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager(Config{Thresholds: []Threshold{hard}}, clocktesting.NewFakeClock(time.Now()))
			e := m.Pick(hard, memObs(50*mi), tc.pods)
			got := ""
			if e != nil {
				got = e.Pod.Name
			}
			if got != tc.want {
				t.Errorf("evicted %q, want %q", got, tc.want)
			}
		})
	}
}

// PID pressure ranks by priority, then process count; a pod whose count
// could not be read (Known false) goes after every counted one.
func TestPickPIDsByProcesses(t *testing.T) {
	th := mustThresholds(t, Flags{Hard: "pid.available<100"})[0]
	procs := func(name string, n int64, opts ...func(*v1.Pod)) PodUsage {
		return PodUsage{Pod: pod(name, opts...), Known: true, Processes: n}
	}
	for _, tc := range []struct {
		name string
		pods []PodUsage
		want string
	}{
		{"most processes", []PodUsage{{Pod: pod("few"), Known: true, Processes: 3, Memory: 900 * mi}, procs("many", 500)}, "many"},
		{"the forker before a pod just started, not counted yet",
			[]PodUsage{{Pod: pod("just-started")}, procs("bystander", 2), procs("forker", 1600)}, "forker"},
		{"lower priority first", []PodUsage{procs("forker", 1600, priority(10)), procs("low", 2, priority(1))}, "low"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager(Config{Thresholds: []Threshold{th}}, clocktesting.NewFakeClock(time.Now()))
			obs := Observations{SignalPIDAvailable: {Available: 10, Capacity: 1000}}
			e := m.Pick(th, obs, tc.pods)
			if e == nil || e.Pod.Name != tc.want {
				t.Fatalf("evicted %+v, want %s", e, tc.want)
			}
			if want := "The node was low on resource: pids. Threshold quantity: 100, available: 10. "; e.Message != want {
				t.Errorf("message %q, want %q", e.Message, want)
			}
		})
	}
}

func TestPickGraceAndMessage(t *testing.T) {
	th := mustThresholds(t, Flags{Hard: "memory.available<100Mi", Soft: "nodefs.available<10%", SoftGracePeriod: "nodefs.available=1m"})
	hard, soft := th[0], th[1]
	m := NewManager(Config{Thresholds: th, MaxPodGracePeriod: 20 * time.Second}, clocktesting.NewFakeClock(time.Now()))
	long, short := int64(60), int64(5)
	p := pod("p", requests("10Mi"), func(p *v1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = &long
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "quiet"})
	})
	u := PodUsage{Pod: p, Known: true, Memory: 300 * mi, Disk: 300 * mi,
		Containers: []ContainerUsage{{Name: "c", Memory: 300 * mi, Disk: 30 * mi}, {Name: "quiet"}}}

	e := m.Pick(hard, memObs(50*mi), []PodUsage{u})
	if e.GracePeriod != 0 {
		t.Errorf("hard grace %v, want 0", e.GracePeriod)
	}
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 300Mi, request is 10Mi, has larger consumption of memory. "
	if e.Message != want {
		t.Errorf("message\n %q, want\n %q", e.Message, want)
	}

	// 10 % as a float32, as the kubelet computes it: not exactly 10Gi.
	disk := Observations{SignalNodeFsAvailable: {Available: 5 << 30, Capacity: 100 << 30}}
	e = m.Pick(soft, disk, []PodUsage{u})
	if e.GracePeriod != 20*time.Second {
		t.Errorf("soft grace %v, want the max pod grace 20s", e.GracePeriod)
	}
	want = "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 5Gi. Container c was using 30Mi, request is 0, has larger consumption of ephemeral-storage. "
	if e.Message != want {
		t.Errorf("message\n %q, want\n %q", e.Message, want)
	}
	p.Spec.TerminationGracePeriodSeconds = &short
	if e = m.Pick(soft, disk, []PodUsage{u}); e.GracePeriod != 5*time.Second {
		t.Errorf("soft grace %v, want the pod's 5s", e.GracePeriod)
	}
}

func TestAdmit(t *testing.T) {
	th := mustThresholds(t, Flags{Hard: "memory.available<100Mi,nodefs.available<10%"})
	bestEffort := pod("be")
	tolerating := pod("tol", func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	})
	critical := pod("crit", func(p *v1.Pod) { p.Spec.PriorityClassName = "system-node-critical" })
	for _, tc := range []struct {
		name string
		obs  Observations
		pod  *v1.Pod
		qos  v1.PodQOSClass
		want string
	}{
		{"no pressure", Observations{SignalMemoryAvailable: {500 * mi, 1000 * mi}}, bestEffort, v1.PodQOSBestEffort, ""},
		{"memory pressure refuses BestEffort", memObs(50 * mi), bestEffort, v1.PodQOSBestEffort, "The node had condition: [MemoryPressure]. "},
		{"memory pressure admits Burstable", memObs(50 * mi), pod("b"), v1.PodQOSBurstable, ""},
		{"memory pressure admits a toleration", memObs(50 * mi), tolerating, v1.PodQOSBestEffort, ""},
		{"disk pressure refuses all", Observations{SignalNodeFsAvailable: {1, 100}}, pod("g"), v1.PodQOSGuaranteed, "The node had condition: [DiskPressure]. "},
		{"critical always", Observations{SignalNodeFsAvailable: {1, 100}}, critical, v1.PodQOSBestEffort, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager(Config{Thresholds: th, PressureTransitionPeriod: time.Minute}, clocktesting.NewFakeClock(time.Now()))
			m.Observe(tc.obs)
			if got := m.Admit(tc.pod, tc.qos); got != tc.want {
				t.Errorf("Admit = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStillMet(t *testing.T) {
	th := mustThresholds(t, Flags{Hard: "nodefs.available<10%", MinimumReclaim: "nodefs.available=5%"})[0]
	for avail, want := range map[int64]bool{5: true, 12: true, 15: false, 50: false} {
		if got := StillMet(th, Observations{SignalNodeFsAvailable: {avail, 100}}); got != want {
			t.Errorf("available %d: still met %v, want %v", avail, got, want)
		}
	}
}
