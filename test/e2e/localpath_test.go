package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A StatefulSet of two on rancher's local-path-provisioner (run out of
// the cluster with the admin kubeconfig; its helper pods, which make and
// remove the volumes' directories through hostPath volumes, run on the
// agent): each replica writes its claim; the pods deleted and made again,
// and the agent restarted, the data is there; scaled to zero and the
// claims deleted, the provisioner's helper pods remove the directories and
// nothing stays mounted.
func TestNodeLocalPathStatefulSet(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	ctx := context.Background()
	bin := builtTool(t, "ensure-local-path-provisioner.sh")
	storage := t.TempDir()
	provisioner := "e2e.example/local-path-" + ns[len(ns)-6:]
	// The provisioner's ConfigMap and service account, as its manifest
	// deploys them (its helper pod runs the agent's test image).
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "local-path-provisioner-service-account"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":[%q]}]}`, storage)
	helper := `apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  priorityClassName: system-node-critical
  tolerations:
  - key: node.kubernetes.io/disk-pressure
    operator: Exists
    effect: NoSchedule
  containers:
  - name: helper-pod
    image: ` + testImage + `
    imagePullPolicy: IfNotPresent
`
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "local-path-config"}, Data: map[string]string{
		"config.json": config, "helperPod.yaml": helper,
		"setup":    "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
		"teardown": "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n",
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := "lp-" + ns
	if _, err := c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: provisioner,
		ReclaimPolicy: ptr.To(v1.PersistentVolumeReclaimDelete), VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StorageV1().StorageClasses().Delete(context.Background(), class, metav1.DeleteOptions{}) })
	logPath := filepath.Join(t.TempDir(), "provisioner.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "start", "--kubeconfig", cl.AdminKubeconfig, "--namespace", ns, "--provisioner-name", provisioner,
		"--helper-image", testImage, "--configmap-name", "local-path-config")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			t.Logf("local-path-provisioner log:\n%s", tailFile(logPath, 40))
		}
	})

	ctr := sleepy("app")
	ctr.Command = []string{"sh", "-c", "[ -f /data/who ] || hostname > /data/who; exec sleep 100000"}
	ctr.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	labels := map[string]string{"app": "web"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To(int32(2)), ServiceName: "web", PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": a.node}, Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}},
			TerminationGracePeriodSeconds: ptr.To(int64(2)), Containers: []v1.Container{ctr}}},
		VolumeClaimTemplates: []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: &class,
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")}}}}},
	}}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := []string{"web-0", "web-1"}
	uids := map[string]string{}
	for _, pod := range replicas {
		uids[pod] = string(waitPodPhase(t, c, ns, pod, v1.PodRunning, 3*time.Minute).UID)
	}
	// Each claim is a directory of the provisioner's under storage.
	who := func() map[string]string {
		out := map[string]string{}
		files, _ := filepath.Glob(filepath.Join(storage, "*", "who"))
		for _, f := range files {
			data, _ := os.ReadFile(f)
			out[strings.TrimSpace(string(data))] = filepath.Base(filepath.Dir(f))
		}
		return out
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		w := who()
		return len(w) == 2 && w["web-0"] != "" && w["web-1"] != "", fmt.Sprintf("the claims' files: %v", w)
	})
	dirs := who()

	// The pods are deleted: the StatefulSet makes them again, on the same
	// claims.
	for _, pod := range replicas {
		if err := c.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pod := range replicas {
		waitFor(t, 3*time.Minute, func() (bool, string) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return string(p.UID) != uids[pod] && p.Status.Phase == v1.PodRunning, fmt.Sprintf("%s: %s %s", pod, p.UID, p.Status.Phase)
		})
	}
	// The agent restarts: the pods keep their containers and data.
	before := map[string]string{}
	for _, pod := range replicas {
		before[pod] = a.running(pod)["app"].ID
	}
	a.stop(syscall.SIGTERM)
	a.start()
	waitNodeReady(t, c, a.node, startupWait)
	time.Sleep(5 * time.Second) // the restarted agent's first syncs
	for _, pod := range replicas {
		if id := a.running(pod)["app"].ID; id != before[pod] {
			t.Errorf("%s: the restart replaced its container %s with %q", pod, before[pod], id)
		}
		if out, err := cl.Kubectl("-n", ns, "exec", pod, "--", "cat", "/data/who"); err != nil || strings.TrimSpace(out) != pod {
			t.Errorf("%s reads %q %v from its claim", pod, out, err)
		}
	}
	if w := who(); w["web-0"] != dirs["web-0"] || w["web-1"] != dirs["web-1"] {
		t.Errorf("the claims' directories changed: %v, then %v", dirs, w)
	}

	// Scaled to zero and the claims deleted: the directories go.
	if _, err := c.AppsV1().StatefulSets(ns).Patch(ctx, "web", "application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, pod := range replicas {
		waitFor(t, time.Minute, func() (bool, string) {
			_, err := c.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			return err != nil, fmt.Sprintf("%s still exists", pod)
		})
	}
	for _, pod := range replicas {
		if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-"+pod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 2*time.Minute, func() (bool, string) {
		entries, err := os.ReadDir(storage)
		return err == nil && len(entries) == 0, fmt.Sprintf("left in the storage directory: %v %v", entries, err)
	})
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), a.rootDir+"/pods") {
		t.Errorf("mounts left under %s/pods", a.rootDir)
	}
}
