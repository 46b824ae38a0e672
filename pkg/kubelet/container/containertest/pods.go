package containertest

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Pod is the pod of the unit tests: default/p (UID uid1) with a container
// of image img:1 for each name, restarted as policy says.
func Pod(policy v1.RestartPolicy, names ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid1"}, Spec: v1.PodSpec{RestartPolicy: policy}}
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img:1"})
	}
	return p
}

// PodWithInit is Pod with app container a and init containers i1 and i2;
// its restart policy is Always, or policy[0].
func PodWithInit(policy ...v1.RestartPolicy) *v1.Pod {
	p := Pod(v1.RestartPolicyAlways, "a")
	if len(policy) > 0 {
		p.Spec.RestartPolicy = policy[0]
	}
	p.Spec.InitContainers = []v1.Container{{Name: "i1", Image: "img:1"}, {Name: "i2", Image: "img:1"}}
	return p
}

// PodWithSidecar is a pod with init containers s1 (a sidecar) then i2, and
// app a.
func PodWithSidecar(policy v1.RestartPolicy) *v1.Pod {
	p := PodWithInit(policy)
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers[0].Name, p.Spec.InitContainers[0].RestartPolicy = "s1", &always
	return p
}

// Builder makes container states with increasing creation times, one
// second apart from T0.
type Builder struct {
	T0 time.Time
	n  int
}

// C is an instance of the pod's container name (the infra container's for
// kubecontainer.InfraContainerName) with the hash of its spec, or
// hashOverride; a dead one ran for a second.
func (b *Builder) C(pod *v1.Pod, name string, running bool, exit int, hashOverride string) *kubecontainer.ContainerState {
	b.n++
	hash := hashOverride
	if hash == "" {
		if name == kubecontainer.InfraContainerName {
			hash = kubecontainer.HashInfra(pod)
		} else if c := kubecontainer.ContainerSpec(pod, name); c != nil {
			hash = kubecontainer.HashContainer(pod, c)
		}
	}
	created := b.T0.Add(time.Duration(b.n) * time.Second)
	return &kubecontainer.ContainerState{
		ID: name + "-" + string(rune('0'+b.n)), Name: name, Hash: hash, Running: running, ExitCode: exit,
		CreatedAt: created, StartedAt: created, FinishedAt: created.Add(time.Second),
	}
}

// State is the state of Pod's containers cs, newest first.
func State(cs ...*kubecontainer.ContainerState) *kubecontainer.PodState {
	s := &kubecontainer.PodState{UID: "uid1", Name: "p", Namespace: "default", Containers: cs}
	kubecontainer.SortNewestFirst(s.Containers)
	return s
}
