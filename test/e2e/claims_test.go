package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// A pod's persistentVolumeClaim in node mode (before: the pod refused,
// "there is no API server to provide it"): it waits with FailedMount while
// the claim is Pending, runs once the control plane's PV controller binds
// it to a hostPath PersistentVolume, and the data outlives the pod: a
// second pod mounting the claim read-only reads it and cannot write it. An
// ephemeral volume's claim, made by the control plane's ephemeral volume
// controller, is mounted the same way. The node reads the claims and
// volumes with its own credentials (Node authorizer).
func TestNodePersistentVolumeClaim(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t, "--backoff-initial", "1s", "--backoff-max", "2s")
	c, ns := readyNode(t, cl, a)
	ctx := context.Background()
	dir := t.TempDir()
	pvName := "e2e-" + ns // volumes are cluster-wide: one name per test namespace
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claimOf("data", pvName), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	withClaim := func(name string, readOnly bool, command string) v1.PodSpec {
		ctr := sleepy("app")
		ctr.Command = []string{"sh", "-c", command}
		ctr.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		spec := onNode(a.node, ctr)
		spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data", ReadOnly: readOnly}}}}
		return spec
	}
	createPod(t, c, ns, "writer", withClaim("data", false, "echo kept > /data/f && exec sleep 100000"))
	waitFailedMount(t, c, ns, "writer", `error processing PVC `+ns+`/data: PVC is not bound`)
	// Waiting costs a read of the claim per back-off step (at most 2 s
	// here) and nothing of Docker: no container is made.
	start := time.Now()
	time.Sleep(6 * time.Second)
	reads := auditedRequests(t, "system:node:"+a.node, start, time.Now())["get /api/v1/namespaces/"+ns+"/persistentvolumeclaims/data"]
	if reads < 1 || reads > 4 {
		t.Errorf("the pending claim was read %d times in 6 s, want one per back-off step of 1-2 s", reads)
	}
	if n := len(a.containers("writer")); n != 0 {
		t.Errorf("%d containers made for a pod whose claim is pending", n)
	}
	makeVolume(t, c, pvName, v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}, nil, ns, "data")
	waitPodPhase(t, c, ns, "writer", v1.PodRunning, startupWait)
	waitFor(t, 10*time.Second, func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(dir, "f"))
		return string(data) == "kept\n", fmt.Sprintf("the volume's file: %q %v", data, err)
	})
	if err := c.CoreV1().Pods(ns).Delete(ctx, "writer", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	createPod(t, c, ns, "reader", withClaim("data", true, "exec sleep 100000"))
	waitPodPhase(t, c, ns, "reader", v1.PodRunning, startupWait)
	if out, err := cl.Kubectl("-n", ns, "exec", "reader", "--", "cat", "/data/f"); err != nil || out != "kept\n" {
		t.Errorf("the second pod reads %q %v, want the first pod's data", out, err)
	}
	if out, err := cl.Kubectl("-n", ns, "exec", "reader", "--", "touch", "/data/g"); err == nil {
		t.Errorf("a readOnly claim is writable: %q", out)
	}

	// An ephemeral volume (the claim eph-scratch is the control plane's) on
	// a local volume of this node, measured in /stats/summary and /metrics
	// as the kubelet measures a local volume (a hostPath one it does not).
	ephDir := t.TempDir()
	ctr := sleepy("app")
	ctr.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	spec := onNode(a.node, ctr)
	template := claimOf("", "e2e-eph-"+ns).Spec
	spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
		VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{Spec: template}}}}}
	affinity := &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
		{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{a.node}}}}}}}
	makeVolume(t, c, "e2e-eph-"+ns, v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: ephDir}}, affinity, ns, "eph-scratch")
	createPod(t, c, ns, "eph", spec)
	waitPodPhase(t, c, ns, "eph", v1.PodRunning, startupWait)
	if out, err := cl.Kubectl("-n", ns, "exec", "eph", "--", "sh", "-c", "echo e > /scratch/e"); err != nil {
		t.Errorf("write the ephemeral volume: %v %q", err, out)
	}
	if data, err := os.ReadFile(filepath.Join(ephDir, "e")); err != nil || string(data) != "e\n" {
		t.Errorf("the ephemeral volume's file: %q %v", data, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(ephDir, &st); err != nil {
		t.Fatal(err)
	}
	capacity := st.Blocks * uint64(st.Bsize)
	code, body := httpGet(a.api(true) + "/stats/summary")
	var sum statsapi.Summary
	if err := json.Unmarshal([]byte(body), &sum); code != 200 || err != nil {
		t.Fatalf("/stats/summary: %d %v", code, err)
	}
	var got []string
	for _, p := range sum.Pods {
		for _, v := range p.VolumeStats {
			got = append(got, fmt.Sprintf("%s/%s %s %+v %d", p.PodRef.Namespace, p.PodRef.Name, v.Name, v.PVCRef, ptr.Deref(v.CapacityBytes, 0)))
		}
	}
	want := fmt.Sprintf("%s/eph scratch &{Name:eph-scratch Namespace:%s} %d", ns, ns, capacity)
	if len(got) != 1 || got[0] != want {
		t.Errorf("volume stats %q, want only %q (the hostPath claim is not measured)", got, want)
	}
	_, metrics := httpGet(a.api(true) + "/metrics")
	series := fmt.Sprintf(`kubelet_volume_stats_capacity_bytes{namespace="%s",persistentvolumeclaim="eph-scratch"} %g`, ns, float64(capacity))
	if !strings.Contains(metrics, series) {
		t.Errorf("/metrics has no %s", series)
	}
}

// claimOf is a claim of 1Mi on the named volume, no storage class.
func claimOf(name, volume string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: new(""), VolumeName: volume,
		Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")}}}}
}

// makeVolume makes a PersistentVolume of src bound in advance to the claim
// ns/claim, deleted at the test's end.
func makeVolume(t *testing.T, c kubernetes.Interface, name string, src v1.PersistentVolumeSource, affinity *v1.VolumeNodeAffinity, ns, claim string) {
	t.Helper()
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")},
		PersistentVolumeSource: src, NodeAffinity: affinity,
		ClaimRef: &v1.ObjectReference{Namespace: ns, Name: claim}, StorageClassName: ""}}
	if _, err := c.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// waitFailedMount waits for the pod's FailedMount event holding want.
func waitFailedMount(t *testing.T, c kubernetes.Interface, ns, pod, want string) {
	t.Helper()
	waitFor(t, 30*time.Second, func() (bool, string) {
		list, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=FailedMount,involvedObject.name=" + pod})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if strings.Contains(e.Message, want) {
				return true, ""
			}
			seen = append(seen, e.Message)
		}
		return false, fmt.Sprintf("FailedMount events of %s: %q, want one with %q", pod, seen, want)
	})
}
