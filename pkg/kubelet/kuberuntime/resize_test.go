package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
)

// res is requirements from "cpu=500m,memory=64Mi" requests and limits.
func res(requests, limits string) v1.ResourceRequirements {
	parse := func(s string) v1.ResourceList {
		if s == "" {
			return nil
		}
		out := v1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			out[v1.ResourceName(k)] = resource.MustParse(v)
		}
		return out
	}
	return v1.ResourceRequirements{Requests: parse(requests), Limits: parse(limits)}
}

// withResources is pod with container name's resources r and resize
// policies (resource=policy), on a copy.
func withResources(pod *v1.Pod, name string, r v1.ResourceRequirements, policies ...string) *v1.Pod {
	out := pod.DeepCopy()
	for _, cs := range [][]v1.Container{out.Spec.Containers, out.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name != name {
				continue
			}
			cs[i].Resources = r
			for _, p := range policies {
				k, v, _ := strings.Cut(p, "=")
				cs[i].ResizePolicy = append(cs[i].ResizePolicy, v1.ContainerResizePolicy{ResourceName: v1.ResourceName(k), RestartPolicy: v1.ResourceResizeRestartPolicy(v)})
			}
		}
	}
	return out
}

// made marks inst as made by this agent from container name of pod as it
// was (was: its resources then): its resources-free hash recorded, its
// bounds applied.
func made(inst *kubecontainer.ContainerState, was *v1.Pod) *kubecontainer.ContainerState {
	c := kubecontainer.ContainerSpec(was, inst.Name)
	inst.Hash = kubecontainer.HashContainer(was, c)
	inst.SpecHash = kubecontainer.HashContainerSpec(was, c)
	r := containerResources(c)
	inst.Resources = &r
	return inst
}

// What a running container made from the spec with other resources
// becomes: nothing, a resize in place, or a restart, as its resizePolicy
// says.
func TestResizeDecision(t *testing.T) {
	base := res("cpu=250m,memory=64Mi", "cpu=500m,memory=128Mi")
	for _, tc := range []struct {
		name     string
		was, now v1.ResourceRequirements
		policies []string
		legacy   bool // made by an older agent: no resources-free hash
		want     resizeNeed
	}{
		{"unchanged", base, base, nil, false, resizeNone},
		{"same bounds, other spelling", res("cpu=0.25,memory=64Mi", "cpu=0.5,memory=128Mi"), base, nil, false, resizeNone},
		{"memory request only: no bound changes", base, res("cpu=250m,memory=100Mi", "cpu=500m,memory=128Mi"), nil, false, resizeNone},
		{"cpu limit, default policy", base, res("cpu=250m,memory=64Mi", "cpu=1,memory=128Mi"), nil, false, resizeInPlace},
		{"cpu request, default policy", base, res("cpu=300m,memory=64Mi", "cpu=500m,memory=128Mi"), nil, false, resizeInPlace},
		{"memory limit, default policy", base, res("cpu=250m,memory=64Mi", "cpu=500m,memory=256Mi"), nil, false, resizeInPlace},
		{"memory limit, NotRequired", base, res("cpu=250m,memory=64Mi", "cpu=500m,memory=96Mi"), []string{"memory=NotRequired"}, false, resizeInPlace},
		{"memory limit, RestartContainer", base, res("cpu=250m,memory=64Mi", "cpu=500m,memory=256Mi"), []string{"memory=RestartContainer"}, false, resizeRestart},
		{"cpu limit, memory RestartContainer", base, res("cpu=250m,memory=64Mi", "cpu=1,memory=128Mi"), []string{"memory=RestartContainer"}, false, resizeInPlace},
		{"cpu limit, cpu RestartContainer", base, res("cpu=250m,memory=64Mi", "cpu=1,memory=128Mi"), []string{"cpu=RestartContainer"}, false, resizeRestart},
		{"memory limit lifted: Docker cannot, restart", base, res("cpu=250m,memory=64Mi", "cpu=500m"), nil, false, resizeRestart},
		{"cpu limit lifted: in place", base, res("cpu=250m,memory=64Mi", "memory=128Mi"), nil, false, resizeInPlace},
		{"older agent's container: never resized", base, res("cpu=250m,memory=64Mi", "cpu=1,memory=128Mi"), nil, true, resizeNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			was := withResources(containertest.Pod(v1.RestartPolicyAlways, "a"), "a", tc.was)
			now := withResources(was, "a", tc.now, tc.policies...)
			b := &containertest.Builder{T0: time.Unix(1e9, 0)}
			inst := made(b.C(was, "a", true, 0, ""), was)
			if tc.legacy {
				inst.SpecHash = ""
			}
			if got, _ := resizeDecision(&now.Spec.Containers[0], inst); got != tc.want {
				t.Errorf("decision %d, want %d", got, tc.want)
			}
		})
	}
}

// computePodActions resizes in place, restarts, or (for a container of an
// older agent, compared by its full hash) replaces a running container
// whose resources changed; the restart of a resize is no crash.
func TestComputePodActionsResize(t *testing.T) {
	small := res("cpu=250m,memory=64Mi", "cpu=500m,memory=128Mi")
	big := res("cpu=250m,memory=64Mi", "cpu=1,memory=256Mi")
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		policies   []string
		legacy     bool
		image      string // the spec's new image, if it changed too
		wantActs   string
		wantResize string
	}{
		{"in place", containertest.Pod(v1.RestartPolicyAlways, "a", "b"), nil, false, "", "", "a"},
		{"in place under Never", containertest.Pod(v1.RestartPolicyNever, "a", "b"), nil, false, "", "", "a"},
		{"RestartContainer: stopped and started again", containertest.Pod(v1.RestartPolicyAlways, "a", "b"), []string{"memory=RestartContainer"}, false, "", "kill:a-2 start:a#1", ""},
		{"older agent's container: replaced", containertest.Pod(v1.RestartPolicyAlways, "a", "b"), nil, true, "", "kill:a-2 start:a#1", ""},
		{"image changed too: replaced", containertest.Pod(v1.RestartPolicyAlways, "a", "b"), nil, false, "img:2", "kill:a-2 start:a#1", ""},
		{"sidecar in place", withResources(containertest.PodWithSidecar(v1.RestartPolicyAlways), "s1", small), nil, false, "", "", "s1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.pod.Spec.Containers[0].Name
			if len(tc.pod.Spec.InitContainers) > 0 {
				name = tc.pod.Spec.InitContainers[0].Name
			}
			was := withResources(tc.pod, name, small)
			now := withResources(was, name, big, tc.policies...)
			if tc.image != "" {
				kubecontainer.ContainerSpec(now, name).Image = tc.image
			}
			b := &containertest.Builder{T0: time.Unix(1e9, 0)}
			var cs []*kubecontainer.ContainerState
			cs = append(cs, b.C(now, infraName, true, 0, ""))
			for _, c := range now.Spec.InitContainers {
				cs = append(cs, made(b.C(was, c.Name, c.Name == "s1", 0, ""), was))
			}
			for _, c := range now.Spec.Containers {
				cs = append(cs, made(b.C(was, c.Name, true, 0, ""), was))
			}
			if tc.legacy {
				for _, c := range cs {
					c.SpecHash = ""
				}
			}
			state := containertest.State(cs...)
			bo := newBackoff(0, 0, clocktesting.NewFakeClock(time.Unix(1e9, 0)))
			a := computePodActions(now, state, time.Unix(1e9, 0).Add(time.Hour), bo, podChecks{})
			if got := summarize(now, a); got != tc.wantActs {
				t.Errorf("actions %q, want %q", got, tc.wantActs)
			}
			var resized []string
			for _, r := range a.resize {
				resized = append(resized, r.spec.Name)
				if want := containerResources(kubecontainer.ContainerSpec(now, r.spec.Name)); r.want != want {
					t.Errorf("resize %s to %+v, want %+v", r.spec.Name, r.want, want)
				}
			}
			if got := strings.Join(resized, ","); got != tc.wantResize {
				t.Errorf("resized %q, want %q", got, tc.wantResize)
			}
			if len(a.crashed) > 0 {
				t.Errorf("crashed %v: a resize's restart is no crash", a.crashed)
			}
			for _, k := range a.kill {
				if tc.policies != nil && k.reason.kind != killResizeRestart {
					t.Errorf("kill reason %v, want resize-restart", k.reason)
				}
			}
		})
	}
}

// orderCgroups and orderRuntime record, in order in one log, what a
// resize asks of the pod cgroup and of the runtime.
type orderCgroups struct {
	*fakeCgroups
	log *[]string
}

func (o orderCgroups) Ensure(n cgroups.Name, r cgroups.Resources) error {
	*o.log = append(*o.log, "pod-cgroup")
	return o.fakeCgroups.Ensure(n, r)
}

type orderRuntime struct {
	*containertest.FakeClient
	log *[]string
}

func (o orderRuntime) Update(ctx context.Context, id string, r kubecontainer.Resources) error {
	*o.log = append(*o.log, "update:"+id)
	return o.FakeClient.Update(ctx, id, r)
}

// The pod cgroup grows before its containers and shrinks after them; a
// shrinking container goes before a growing one; a memory limit is not
// lowered below what is in use.
func TestResizeContainersOrder(t *testing.T) {
	small := res("", "cpu=500m,memory=128Mi")
	big := res("", "cpu=1,memory=256Mi")
	for _, tc := range []struct {
		name          string
		aWas, aNow    v1.ResourceRequirements
		bWas, bNow    v1.ResourceRequirements
		podUse, aUse  int64
		want, wantErr string
	}{
		{"grow", small, big, small, small, 0, 0, "pod-cgroup update:a", ""},
		{"shrink", big, small, small, small, 0, 0, "update:a pod-cgroup", ""},
		{"one shrinks, one grows: pod the same", big, small, small, big, 0, 0, "update:a update:b", ""},
		{"one shrinks a little, one grows more: the pod grows first", big, res("", "cpu=1,memory=200Mi"), small, big, 0, 0, "pod-cgroup update:a update:b", ""},
		{"cpu grows, memory shrinks: pod cgroup both ways", res("", "cpu=500m,memory=256Mi"), res("", "cpu=1,memory=128Mi"), small, small, 0, 0, "pod-cgroup update:a pod-cgroup", ""},
		{"pod memory in use", big, small, small, small, 300 << 20, 0, "", "less than current memory usage for pod p"},
		{"container memory in use", big, small, small, small, 0, 200 << 20, "", "aborting attempt to set container a memory limit less than current memory usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			was := withResources(withResources(containertest.Pod(v1.RestartPolicyAlways, "a", "b"), "a", tc.aWas), "b", tc.bWas)
			now := withResources(withResources(was, "a", tc.aNow), "b", tc.bNow)
			var log []string
			cg, fake := newFakeCgroups(), containertest.NewFakeClient()
			m := newTestManager(t, Config{Cgroups: orderCgroups{cg, &log}}, orderRuntime{fake, &log})
			m.relist = noRelist{}
			pc := cgName(cgroups.PodName(kubecontainer.QOSClass(now), now.UID))
			cg.usage = map[string]int64{pc: tc.podUse, pc + "/a": tc.aUse}
			var resizes []containerResize
			for _, name := range []string{"a", "b"} {
				fake.AddContainer(kubecontainer.ContainerDetail{ID: name, Name: name, Running: true})
				inst := made(&kubecontainer.ContainerState{ID: name, Name: name, Running: true}, was)
				if need, want := resizeDecision(kubecontainer.ContainerSpec(now, name), inst); need == resizeInPlace {
					resizes = append(resizes, containerResize{c: inst, spec: kubecontainer.ContainerSpec(now, name), want: want})
				}
			}
			err := m.resizeContainers(context.Background(), now, resizes)
			switch {
			case tc.wantErr != "" && (err == nil || !errors.Is(err, errMemoryInUse) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			}
			if got := strings.Join(log, " "); got != tc.want {
				t.Errorf("order %q, want %q", got, tc.want)
			}
			if strings.Contains(tc.want, "pod-cgroup") {
				if got, want := cg.res[pc], podCgroupResources(now); got.Memory != want.Memory || got.CPUQuota != want.CPUQuota {
					t.Errorf("pod cgroup %+v, want %+v", got, want)
				}
			}
		})
	}
}

// The resources a status reports are the spec's as written where the
// runtime enforces what they map to, and the runtime's otherwise.
func TestAppliedResources(t *testing.T) {
	c := &v1.Container{Name: "a", Resources: res("cpu=250m,memory=64Mi", "cpu=500m,memory=128Mi")}
	same := containerResources(c)
	got := AppliedResources(c, same)
	if !got.Limits.Cpu().Equal(resource.MustParse("500m")) || got.Limits.Memory().String() != "128Mi" ||
		got.Requests.Cpu().String() != "250m" || got.Requests.Memory().String() != "64Mi" {
		t.Errorf("as allocated: %v", got)
	}
	older := kubecontainer.Resources{CPUShares: 512, CPUQuota: 100000, CPUPeriod: quotaPeriod, Memory: 256 << 20}
	got = AppliedResources(c, older)
	if got.Limits.Cpu().MilliValue() != 1000 || got.Limits.Memory().Value() != 256<<20 || got.Requests.Cpu().MilliValue() != 500 {
		t.Errorf("not yet resized: %v", got)
	}
}
