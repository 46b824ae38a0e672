package eviction

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// LocalUsage is what a pod holds of the node's local ephemeral storage,
// in bytes.
type LocalUsage struct {
	Volumes    map[string]int64 // by volume name: its disk emptyDirs
	Containers map[string]int64 // by container name: writable layer and logs
}

// HasLocalStorageLimits reports whether the pod has a limit that
// LocalStorageViolation checks: a disk emptyDir's sizeLimit or a
// container's limits.ephemeral-storage. A Memory emptyDir is bounded by
// its tmpfs instead.
func HasLocalStorageLimits(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if isDiskEmptyDir(v) && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.Sign() > 0 {
			return true
		}
	}
	return HasContainerStorageLimits(pod)
}

// HasContainerStorageLimits reports whether a container of the pod limits
// its ephemeral storage (so the pod's total is bounded too).
func HasContainerStorageLimits(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if _, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok {
				return true
			}
		}
	}
	return false
}

func isDiskEmptyDir(v v1.Volume) bool {
	return v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumMemory
}

// LocalStorageViolation is the kubelet's local storage eviction: the
// message of the first limit the pod exceeds, checked as the kubelet
// checks them (an emptyDir's sizeLimit, the pod's total against the sum
// of its containers' limits, a container's limit), or "". Such a pod is
// evicted at once, whatever the node's thresholds.
func LocalStorageViolation(pod *v1.Pod, u LocalUsage) string {
	for _, v := range pod.Spec.Volumes {
		if !isDiskEmptyDir(v) || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 {
			continue
		}
		// Compared as quantities, as the kubelet: a sizeLimit past what an
		// int64 holds (1e30) has no Value (it was 0, and the pod was
		// evicted at its first byte); it is never reached.
		if used, ok := u.Volumes[v.Name]; ok && resource.NewQuantity(used, resource.BinarySI).Cmp(*v.EmptyDir.SizeLimit) > 0 {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", v.Name, v.EmptyDir.SizeLimit.String())
		}
	}
	if limit, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]; ok && limit.Sign() > 0 {
		var total int64
		for _, n := range u.Containers {
			total += n
		}
		for _, v := range pod.Spec.Volumes {
			if isDiskEmptyDir(v) {
				total += u.Volumes[v.Name]
			}
		}
		if resource.NewQuantity(total, resource.BinarySI).Cmp(limit) > 0 { // the sum can pass int64
			return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", limit.String())
		}
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			limit, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
			if used, have := u.Containers[c.Name]; ok && have && resource.NewQuantity(used, resource.BinarySI).Cmp(limit) > 0 {
				return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", c.Name, limit.String())
			}
		}
	}
	return ""
}
