package kuberuntime

import (
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// podView is one sync's look at a pod, built once by newPodView: the spec's
// containers by kind, each with its hash and the relist's instances of it,
// and the infra container the pod runs in. The phases of computePodActions
// read it and never change it.
type podView struct {
	pod    *v1.Pod
	state  *kubecontainer.PodState // never nil
	checks podChecks               // every check set

	infraHash string
	// infra is the pod's current infra container, the newest running one
	// with the spec's hash; nil when the pod needs a new one.
	infra *kubecontainer.ContainerState
	// sandboxGone: no infra container runs and the newest one stopped
	// (killed or removed from outside): the pod's network went with it.
	sandboxGone bool
	// initialized: an app container has run in the current sandbox, so a
	// sidecar restarting later holds nothing back.
	initialized bool

	init, apps, ephemeral []specContainer
	// inSpec holds the names of the spec's containers, and the infra
	// container's.
	inSpec map[string]bool
}

// specContainer is one container of the pod's spec and its instances.
type specContainer struct {
	index     int // in the spec's list of its kind
	spec      *v1.Container
	hash      string                          // HashContainerSpec: its back-off's key
	instances []*kubecontainer.ContainerState // the relist's, newest first
}

// newPodView looks at pod and its containers (state, nil: none). A check
// not given answers as podChecks says.
func newPodView(pod *v1.Pod, state *kubecontainer.PodState, checks podChecks) *podView {
	if state == nil {
		state = &kubecontainer.PodState{}
	}
	v := &podView{pod: pod, state: state, checks: checks.withDefaults(), infraHash: kubecontainer.HashInfra(pod),
		inSpec: map[string]bool{infraName: true}}
	byName := map[string][]*kubecontainer.ContainerState{} // newest first, as state's
	for _, c := range state.Containers {
		byName[c.Name] = append(byName[c.Name], c)
	}
	infras := byName[infraName]
	for _, c := range infras {
		if c.Running && c.Hash == v.infraHash {
			v.infra = c
			break
		}
	}
	v.sandboxGone = v.infra == nil && len(infras) > 0 && !infras[0].Running
	add := func(list *[]specContainer, i int, c *v1.Container) {
		v.inSpec[c.Name] = true
		*list = append(*list, specContainer{index: i, spec: c, hash: kubecontainer.HashContainerSpec(pod, c), instances: byName[c.Name]})
	}
	for i := range pod.Spec.InitContainers {
		add(&v.init, i, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		add(&v.apps, i, &pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		add(&v.ephemeral, i, kubecontainer.EphemeralSpec(pod, i))
	}
	for _, c := range v.apps {
		for _, inst := range c.instances {
			v.initialized = v.initialized || v.current(inst)
		}
	}
	return v
}

// current reports whether an instance belongs to the pod's current
// incarnation: one created before the current infra container ran in an
// earlier one, and a new infra container means the init containers run
// again.
func (v *podView) current(c *kubecontainer.ContainerState) bool {
	return v.infra != nil && !c.CreatedAt.Before(v.infra.CreatedAt)
}

// staleReason is why a running instance that is not current is stopped.
func (v *podView) staleReason() killReason {
	switch {
	case v.sandboxGone:
		return killReason{kind: killSandboxGone}
	case v.infra == nil:
		return killReason{kind: killNewSandbox}
	default:
		return killReason{kind: killStaleIncarnation}
	}
}

// same reports whether inst was made from the spec as it is now
// (resources aside, when inst says how: kubecontainer.SameSpec).
func (v *podView) same(c *specContainer, inst *kubecontainer.ContainerState) bool {
	return kubecontainer.SameSpec(v.pod, c.spec, inst)
}

// restartCount is the restart count of a container's next instance.
func (c *specContainer) restartCount() int {
	if len(c.instances) == 0 {
		return 0
	}
	return c.instances[0].RestartCount + 1
}
