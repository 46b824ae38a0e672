package api

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	resourcehelper "k8s.io/component-helpers/resource"
)

// WithDefaultRequests is the pod with a cpu or memory request wherever only
// a limit is written (container or pod level), as the API server defaults
// it (and the kubelet, decoding a static pod). The pod as given is kept as
// it is: its containers' hashes come from it.
func WithDefaultRequests(pod *v1.Pod) *v1.Pod {
	out := pod.DeepCopy()
	for _, cs := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			defaultRequests(&cs[i].Resources)
		}
	}
	if out.Spec.Resources != nil {
		defaultRequests(out.Spec.Resources)
	}
	return out
}

func defaultRequests(r *v1.ResourceRequirements) {
	for name, lim := range r.Limits {
		if _, ok := r.Requests[name]; !ok && (name == v1.ResourceCPU || name == v1.ResourceMemory) {
			if r.Requests == nil {
				r.Requests = v1.ResourceList{}
			}
			r.Requests[name] = lim
		}
	}
}

// PodRequests is what the pod asks of the node as the kubelet's admission
// counts it: its requests (defaulted from its limits) summed over the app
// containers and sidecars, an init container's alone if larger, or the
// pod-level requests where written.
func PodRequests(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(WithDefaultRequests(pod), resourcehelper.PodResourcesOptions{})
}

// LargestRequest names the field of the pod that asks the most of
// resource name (a limit, where it stands for an unwritten request), with
// its value; "" if none asks for any.
func LargestRequest(pod *v1.Pod, name v1.ResourceName) (string, resource.Quantity) {
	var where string
	var most resource.Quantity
	consider := func(p string, r *v1.ResourceRequirements) {
		list, field := r.Requests, "requests"
		if _, ok := list[name]; !ok {
			list, field = r.Limits, "limits"
		}
		if q, ok := list[name]; ok && (where == "" || q.Cmp(most) > 0) {
			where, most = fmt.Sprintf("%s.resources.%s[%s]", p, field, name), q
		}
	}
	if r := pod.Spec.Resources; r != nil {
		consider("spec", r)
	}
	for i := range pod.Spec.InitContainers {
		consider(fmt.Sprintf("spec.initContainers[%d]", i), &pod.Spec.InitContainers[i].Resources)
	}
	for i := range pod.Spec.Containers {
		consider(fmt.Sprintf("spec.containers[%d]", i), &pod.Spec.Containers[i].Resources)
	}
	return where, most
}

// IsExtendedResourceName reports whether name is an extended resource (one
// a device plugin may advertise, or a cluster's own), as the API server
// judges it: a qualified name with a domain other than kubernetes.io, not
// a quota's "requests." form.
func IsExtendedResourceName(name v1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.HasPrefix(s, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+s)) == 0
}
