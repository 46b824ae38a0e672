package eviction

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/await"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/diskusage"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
)

// fakePods are the Kubelet's desired pods and records.
type fakePods struct {
	desired []*v1.Pod
	evicted map[types.UID]string // message
	refused map[types.UID]bool
	synced  []types.UID
}

func (p *fakePods) Desired() []*v1.Pod { return p.desired }

func (p *fakePods) DesiredPod(uid types.UID) *v1.Pod {
	for _, pod := range p.desired {
		if pod.UID == uid {
			return pod
		}
	}
	return nil
}

func (p *fakePods) Evicted(uid types.UID) bool { _, ok := p.evicted[uid]; return ok }

func (p *fakePods) Evict(uid types.UID, message string, _ time.Duration) {
	p.evicted[uid] = message
}

func (p *fakePods) RefusedUnderPressure(uid types.UID) bool { return p.refused[uid] }
func (p *fakePods) Sync(uids []types.UID)                   { p.synced = append(p.synced, uids...) }

// fakeStates are the relist's pod states; an evicted pod's containers are
// all dead (as once its worker stopped it).
type fakeStates struct {
	m    map[types.UID]*kubecontainer.PodState
	pods *fakePods
}

func (s fakeStates) Get(uid types.UID) *kubecontainer.PodState {
	st := s.m[uid]
	if st == nil || !s.pods.Evicted(uid) {
		return st
	}
	stopped := *st
	stopped.Containers = nil
	for _, c := range st.Containers {
		dead := *c
		dead.Running = false
		stopped.Containers = append(stopped.Containers, &dead)
	}
	return &stopped
}

func (s fakeStates) All() map[types.UID]*kubecontainer.PodState { return s.m }

// fakeRuntime records what is done to containers.
type fakeRuntime struct{ calls []string }

func (r *fakeRuntime) RemoveContainer(_ context.Context, c *kubecontainer.ContainerState) error {
	r.calls = append(r.calls, "remove "+c.ID)
	return nil
}

type fakeImages struct{ deleted int }

func (i *fakeImages) DeleteUnused(context.Context) { i.deleted++ }

type fakeVolumes struct{ root string }

func (v fakeVolumes) PodDir(uid types.UID) string { return filepath.Join(v.root, "pods", string(uid)) }
func (v fakeVolumes) EmptyDirPath(uid types.UID, name string) string {
	return filepath.Join(v.PodDir(uid), "volumes", "kubernetes.io~empty-dir", name)
}

type fakeDisk struct{ last *diskusage.Stats }

func (d fakeDisk) Last() *diskusage.Stats { return d.last }

type fakeEvents struct{ got []string }

func (e *fakeEvents) Event(ref events.Ref, warning bool, reason, format string, args ...any) {
	e.got = append(e.got, fmt.Sprintf("%s %s %v %s: %s", ref.Name, ref.UID, warning, reason, fmt.Sprintf(format, args...)))
}

// evictorTest is an Evictor on fakes, timed by a fake clock.
type evictorTest struct {
	*Evictor
	pods    *fakePods
	states  fakeStates
	runtime *fakeRuntime
	images  *fakeImages
	volumes fakeVolumes
	events  *fakeEvents
	clock   *await.FakeClock
}

func newEvictorTest(t *testing.T, cfg EvictorConfig) *evictorTest {
	pods := &fakePods{evicted: map[types.UID]string{}, refused: map[types.UID]bool{}}
	et := &evictorTest{
		pods:    pods,
		states:  fakeStates{m: map[types.UID]*kubecontainer.PodState{}, pods: pods},
		runtime: &fakeRuntime{},
		images:  &fakeImages{},
		volumes: fakeVolumes{root: t.TempDir()},
		events:  &fakeEvents{},
		clock:   await.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
	et.Evictor = NewEvictor(cfg, Deps{Pods: et.pods, States: et.states, Runtime: et.runtime, Images: et.images,
		Volumes: et.volumes, Disk: fakeDisk{}, Events: et.events,
		GC: func() gc.Policy { return gc.Policy{} }, Clock: et.clock})
	return et
}

// addPod makes pod desired, with the containers of state.
func (et *evictorTest) addPod(pod *v1.Pod, state *kubecontainer.PodState) {
	et.pods.desired = append(et.pods.desired, pod)
	state.UID = pod.UID
	for _, c := range state.Containers {
		c.ID += "-" + string(pod.UID)
	}
	et.states.m[pod.UID] = state
}

func podWithUID(uid types.UID) *v1.Pod {
	p := containertest.Pod(v1.RestartPolicyAlways, "a")
	p.UID, p.Name = uid, string(uid)
	return p
}

// memoryNode is a node whose memory.available is total-used (bytes), as
// read from files under a temporary directory.
func memoryNode(t *testing.T, total, used int64) Node {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"proc/meminfo":                        fmt.Sprintf("MemTotal: %d kB\nMemFree: 0 kB\n", total>>10),
		"cgroup/memory/memory.usage_in_bytes": fmt.Sprintf("%d\n", used),
		"cgroup/memory/memory.stat":           "total_inactive_file 0\n",
	})
	return Node{Proc: filepath.Join(dir, "proc"), CgroupMount: filepath.Join(dir, "cgroup"), RootDir: dir}
}

func memoryThresholds(t *testing.T) []Threshold {
	th, err := ParseThresholds(Flags{Hard: "memory.available<100Mi"})
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// Disk reclaim removes every dead container of an evicted pod, the newest
// instances too (GC keeps those for a desired pod): what the pod wrote to
// its layers and logs is freed, so the pressure it caused ends with it and
// no other pod is evicted for it. Unused images go every time.
func TestReclaimDisk(t *testing.T) {
	for _, tc := range []struct {
		name    string
		evicted []types.UID
		want    []string // removed
	}{
		{name: "evicted pod: all its dead containers", evicted: []types.UID{"evicted"},
			want: []string{"remove POD-1-evicted", "remove a-2-evicted"}},
		{name: "no pod evicted: the newest dead instances kept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			et := newEvictorTest(t, EvictorConfig{})
			b := &containertest.Builder{T0: et.clock.Now().Add(-time.Hour)}
			for _, uid := range []types.UID{"evicted", "kept"} {
				p := podWithUID(uid)
				et.addPod(p, containertest.State(b.C(p, infraName, false, 0, ""), b.C(p, "a", false, 1, "")))
			}
			for _, uid := range tc.evicted {
				et.pods.evicted[uid] = "evicted"
			}
			et.reclaimDisk(context.Background())
			slices.Sort(et.runtime.calls)
			if !slices.Equal(et.runtime.calls, tc.want) {
				t.Errorf("runtime calls %v, want %v", et.runtime.calls, tc.want)
			}
			if et.images.deleted != 1 {
				t.Errorf("unused images deleted %d times, want 1", et.images.deleted)
			}
		})
	}
}

// A round (periodic or started by the memory threshold notification) runs
// in the eviction loop's goroutine and the notification is re-armed from
// what it observed; a notification soon after the last one waits out
// minNotificationGap on the clock; a done ctx ends the loop without a
// round.
func TestIteration(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tick      bool
		crossed   bool
		sinceLast time.Duration // since the last notification's round (0: none yet)
		cancelled bool
		wantWait  time.Duration // on the clock before the round
		wantMore  bool
		wantRound bool
	}{
		{name: "notification: a round at once", crossed: true, wantMore: true, wantRound: true},
		{name: "notification within the gap: a round when it ends", crossed: true, sinceLast: 100 * time.Millisecond,
			wantWait: minNotificationGap - 100*time.Millisecond, wantMore: true, wantRound: true},
		{name: "housekeeping period: a round", tick: true, wantMore: true, wantRound: true},
		{name: "ctx done: no round", cancelled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			et := newEvictorTest(t, EvictorConfig{Eviction: Config{Thresholds: memoryThresholds(t)},
				Node: memoryNode(t, 1<<30, 100<<20), Period: 2 * time.Second})
			var rearmed []Observations
			rearm := func(obs Observations) { rearmed = append(rearmed, obs) }
			tick, crossed := make(chan time.Time, 1), make(chan struct{}, 1)
			if tc.tick {
				tick <- et.clock.Now()
			}
			if tc.crossed {
				crossed <- struct{}{}
			}
			var last time.Time
			if tc.sinceLast > 0 {
				last = et.clock.Now().Add(-tc.sinceLast)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			start := et.clock.Now()
			result := make(chan bool, 1)
			go func() { result <- et.iteration(ctx, tick, crossed, rearm, &last) }()
			if tc.wantWait > 0 {
				// The wait is on the clock, and only the test moves it.
				if d := et.clock.AwaitWait(t, 1); d != tc.wantWait {
					t.Errorf("the round waits %v on the clock, want %v", d, tc.wantWait)
				}
				et.clock.Step(tc.wantWait)
			}
			var more bool
			select {
			case more = <-result:
			case <-time.After(await.Timeout):
				t.Fatal("the iteration still waits after the clock was stepped past its wait")
			}
			if n := et.clock.Waits(); tc.wantWait == 0 && n != 0 {
				t.Errorf("the iteration waited on the clock %d times, want none", n)
			}
			if more != tc.wantMore {
				t.Errorf("iteration returned %v, want %v", more, tc.wantMore)
			}
			if !tc.wantRound {
				if len(rearmed) != 0 {
					t.Errorf("re-armed %d times, want no round", len(rearmed))
				}
				return
			}
			want := Observation{Available: 1<<30 - 100<<20, Capacity: 1 << 30}
			if len(rearmed) != 1 || rearmed[0][SignalMemoryAvailable] != want {
				t.Errorf("re-armed from %v, want once from memory.available %+v", rearmed, want)
			}
			if tc.crossed && !last.Equal(start.Add(tc.wantWait)) {
				t.Errorf("last notification round at %v, want %v", last, start.Add(tc.wantWait))
			}
		})
	}
}

// A round under memory pressure evicts the running pod the manager picks:
// an Evicted event, the pod's termination asked for (its worker stops it),
// and the round returns once its containers stopped. The pods refused under pressure are
// synced again when the pressure conditions change.
func TestRoundEvicts(t *testing.T) {
	for _, tc := range []struct {
		name        string
		used        int64
		wantEvicted bool
		wantSynced  []types.UID
	}{
		{name: "under the threshold: nothing evicted", used: 100 << 20},
		{name: "over it: the running pod evicted, the refused one readmitted", used: 1<<30 - 50<<20,
			wantEvicted: true, wantSynced: []types.UID{"refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			et := newEvictorTest(t, EvictorConfig{Eviction: Config{Thresholds: memoryThresholds(t)},
				Node: memoryNode(t, 1<<30, tc.used), Period: 2 * time.Second})
			b := &containertest.Builder{T0: et.clock.Now().Add(-time.Hour)}
			running := podWithUID("running")
			et.addPod(running, containertest.State(b.C(running, infraName, true, 0, ""), b.C(running, "a", true, 0, "")))
			et.pods.desired = append(et.pods.desired, podWithUID("refused"))
			et.pods.refused["refused"] = true

			et.round(context.Background(), roundPeriodic)
			msg, evicted := et.pods.evicted["running"]
			if evicted != tc.wantEvicted {
				t.Fatalf("evicted %v, want %v", evicted, tc.wantEvicted)
			}
			if !slices.Equal(et.pods.synced, tc.wantSynced) {
				t.Errorf("synced %v, want %v", et.pods.synced, tc.wantSynced)
			}
			if !evicted {
				if len(et.events.got) != 0 {
					t.Errorf("events %v, want none", et.events.got)
				}
				return
			}
			if !strings.HasPrefix(msg, "The node was low on resource: memory.") {
				t.Errorf("eviction message %q", msg)
			}
			if want := []string{"running running true Evicted: " + msg}; !slices.Equal(et.events.got, want) {
				t.Errorf("events %v, want %v", et.events.got, want)
			}
		})
	}
}

// Under memory pressure a BestEffort pod is refused with the kubelet's
// reason and message, a Burstable one is not.
func TestAdmitPod(t *testing.T) {
	burstable := podWithUID("burstable")
	burstable.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string // message; "" admitted
	}{
		{name: "BestEffort refused", pod: podWithUID("be"), want: "The node had condition: [MemoryPressure]. "},
		{name: "Burstable admitted", pod: burstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			et := newEvictorTest(t, EvictorConfig{Eviction: Config{Thresholds: memoryThresholds(t), PressureTransitionPeriod: time.Minute}})
			et.Manager().Observe(Observations{SignalMemoryAvailable: {Available: 50 << 20, Capacity: 1 << 30}})
			rej := et.AdmitPod(tc.pod)
			switch {
			case tc.want == "" && rej != nil:
				t.Errorf("refused: %+v", rej)
			case tc.want != "" && (rej == nil || rej.Reason != Reason || rej.Message != tc.want):
				t.Errorf("rejection %+v, want %s %q", rej, Reason, tc.want)
			}
		})
	}
}

// Under disk pressure the pods are measured when ranked, not taken from
// the background measurement (issue 49): there the bystander had written
// 173 bytes and the hog nothing yet; now the hog holds 1 MiB in its
// emptyDir (or its writable layer) and is picked. A layer whose driver
// names no directory is taken from the background measurement; a
// container in none leaves its pod unmeasured, ranked after the others.
func TestDiskRankingMeasuresNow(t *testing.T) {
	th := mustThresholds(t, Flags{Hard: "nodefs.available<10%"})[0]
	obs := Observations{SignalNodeFsAvailable: {Available: 1, Capacity: 100}}
	for _, tc := range []struct {
		name        string
		hogWrites   string // "volume" or "layer": where the hog's MiB is
		layerPaths  bool   // the driver names the containers' upper dirs
		inLast      []string
		want        string
		wantUnknown []types.UID
	}{
		{name: "hog's emptyDir walked", hogWrites: "volume", layerPaths: true, want: "hog"},
		{name: "hog's writable layer walked", hogWrites: "layer", layerPaths: true, want: "hog"},
		{name: "no layer paths: layers from the background measurement, volumes walked", hogWrites: "volume",
			inLast: []string{"bystander", "hog"}, want: "hog"},
		{name: "no layer paths, the hog in no measurement: unmeasured, after the bystander", hogWrites: "volume",
			inLast: []string{"bystander"}, want: "bystander", wantUnknown: []types.UID{"hog"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			et := newEvictorTest(t, EvictorConfig{})
			b := &containertest.Builder{T0: et.clock.Now().Add(-time.Hour)}
			layers := t.TempDir()
			last := &diskusage.Stats{Runtime: &kubecontainer.DiskUsage{Writable: map[string]int64{}},
				Volumes: map[types.UID]int64{"bystander": 4096}}
			for _, uid := range []types.UID{"bystander", "hog"} {
				p := podWithUID(uid)
				p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
				infra, app := b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, "")
				et.addPod(p, containertest.State(infra, app))
				if tc.layerPaths {
					for _, c := range []*kubecontainer.ContainerState{infra, app} {
						c.LayerPath = filepath.Join(layers, c.ID)
						writeFiles(t, c.LayerPath, map[string]string{"etc/hostname": "x"})
					}
				}
				if slices.Contains(tc.inLast, string(uid)) {
					last.Runtime.Writable[infra.ID], last.Runtime.Writable[app.ID] = 0, 0
				}
				writeFiles(t, et.volumes.EmptyDirPath(uid, "data"), map[string]string{"note": strings.Repeat("x", 173)})
				if uid != "hog" {
					continue
				}
				dir := et.volumes.EmptyDirPath(uid, "data")
				if tc.hogWrites == "layer" {
					dir = app.LayerPath
				}
				writeFiles(t, dir, map[string]string{"fill": strings.Repeat("x", 1<<20)})
			}
			et.d.Disk = fakeDisk{last: last}

			usages := et.podUsages(context.Background(), SignalNodeFsAvailable)
			var unknown []types.UID
			for _, u := range usages {
				if !u.Known {
					unknown = append(unknown, u.Pod.UID)
				}
			}
			if !slices.Equal(unknown, tc.wantUnknown) {
				t.Errorf("unmeasured %v, want %v", unknown, tc.wantUnknown)
			}
			ev := et.Manager().Pick(th, obs, usages)
			if ev == nil || ev.Pod.Name != tc.want {
				t.Fatalf("picked %+v, want %s (usages %+v)", ev, tc.want, usages)
			}
		})
	}
}
