package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// A CSI node plugin (test/csiplugin: csi-test's driver harness serving a
// directory-backed driver, registering as node-driver-registrar does)
// registers through the agent's plugins_registry; the node's CSINode names
// it. A pod whose inline csi volume names it waits (FailedMount, the
// kubelet's message, at back-off pace, no container) until it registers. A
// csi PersistentVolume is staged and published with the kubelet's paths;
// an agent restart leaves the running pod's volume published, and
// unpublishes that of a pod deleted while it was down; deleting the pod
// unpublishes and unstages it exactly once.
func TestNodeCSIVolume(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t, "--backoff-initial", "1s", "--backoff-max", "2s")
	c, ns := readyNode(t, cl, a)
	ctx := context.Background()
	driver := ns[len(ns)-6:] + ".e2e.csi.example" // cluster-wide: one per test namespace
	if _, err := c.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true), FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StorageV1().CSIDrivers().Delete(context.Background(), driver, metav1.DeleteOptions{}) })

	// Before the plugin: the inline volume's pod waits.
	ctr := sleepy("app")
	ctr.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	inline := onNode(a.node, ctr)
	inline.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: driver,
		VolumeAttributes: map[string]string{"kind": "scratch"}}}}}
	createPod(t, c, ns, "inline", inline)
	waitFailedMount(t, c, ns, "inline", "driver name "+driver+" not found in the list of registered CSI drivers")
	// Waiting costs the node nothing between tries: no Docker call but the
	// relist's lists (the periodic one, and one of the pod after each try),
	// next to no CPU.
	ops0, cpu0, t0 := a.operations(), a.cpu(), time.Now()
	time.Sleep(6 * time.Second)
	if n := failedMounts(t, c, ns, "inline"); n < 2 || n > 8 {
		t.Errorf("%d FailedMount tries in about 6 s, want one per back-off step of 1-2 s", n)
	}
	ops, cores := a.operationsSince(ops0), (a.cpu()-cpu0).Seconds()/time.Since(t0).Seconds()
	t.Logf("waiting for the driver: Docker calls %v, %.4f cores", ops, cores)
	lists := ops["list_containers"]
	delete(ops, "list_containers")
	delete(ops, "image_fs_info") // the node's, every 10 s, whatever its pods do
	if len(ops) > 0 || lists > 8 || cores > 0.05 {
		t.Errorf("waiting for the driver cost Docker calls %v and %.4f cores in 6 s, want only the relist's lists and next to no CPU", ops, cores)
	}
	if n := len(a.containers("inline")); n != 0 {
		t.Errorf("%d containers made for a pod whose driver is not registered", n)
	}

	p := startCSIPlugin(t, a, driver)
	waitFor(t, 30*time.Second, func() (bool, string) {
		cn, err := c.StorageV1().CSINodes().Get(ctx, a.node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == driver && d.NodeID == "id-"+a.node && len(d.TopologyKeys) == 1 && d.TopologyKeys[0] == "topology.e2e.csi.example/node" {
				return len(cn.OwnerReferences) == 1 && cn.OwnerReferences[0].Kind == "Node", ""
			}
		}
		return false, fmt.Sprintf("CSINode drivers %+v", cn.Spec.Drivers)
	})
	node, err := c.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ann, label := node.Annotations["csi.volume.kubernetes.io/nodeid"], node.Labels["topology.e2e.csi.example/node"]; !strings.Contains(ann, `"`+driver+`":"id-`+a.node+`"`) || label != a.node {
		t.Errorf("node annotation %q, topology label %q", ann, label)
	}
	waitPodPhase(t, c, ns, "inline", v1.PodRunning, startupWait)
	inlinePod, err := c.CoreV1().Pods(ns).Get(ctx, "inline", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inlineTarget := filepath.Join(a.rootDir, "pods", string(inlinePod.UID), "volumes/kubernetes.io~csi/scratch/mount")
	pub := p.only(t, "NodePublishVolume", inlineTarget)
	if pub.StagingTargetPath != "" || pub.VolumeContext["kind"] != "scratch" || pub.VolumeContext["csi.storage.k8s.io/ephemeral"] != "true" ||
		pub.VolumeContext["csi.storage.k8s.io/pod.name"] != "inline" {
		t.Errorf("inline publish %+v", pub)
	}

	// A persistent volume of the driver, through a claim.
	pvName, handle := "e2e-csi-"+ns, "vol-"+ns
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claimOf("data", pvName), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	makeVolume(t, c, pvName, v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}}, nil, ns, "data")
	ctr = sleepy("app")
	ctr.Command = []string{"sh", "-c", "echo kept > /data/f && exec sleep 100000"}
	ctr.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	spec := onNode(a.node, ctr)
	spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To(int64(2345))}
	spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	createPod(t, c, ns, "writer", spec)
	writer := waitPodPhase(t, c, ns, "writer", v1.PodRunning, startupWait)
	waitFor(t, 10*time.Second, func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(p.backing, handle, "f"))
		return string(data) == "kept\n", fmt.Sprintf("the volume's file: %q %v", data, err)
	})
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(p.backing, handle), &st); err != nil || st.Gid != 2345 {
		t.Errorf("the volume's root: gid %d %v, want the pod's fsGroup 2345 (the driver's policy is File)", st.Gid, err)
	}
	staging := filepath.Join(a.rootDir, "plugins/kubernetes.io/csi", driver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), "globalmount")
	target := filepath.Join(a.rootDir, "pods", string(writer.UID), "volumes/kubernetes.io~csi", pvName, "mount")
	p.only(t, "NodeStageVolume", staging)
	if pub := p.only(t, "NodePublishVolume", target); pub.StagingTargetPath != staging || pub.Mode != "SINGLE_NODE_WRITER" {
		t.Errorf("publish %+v, want staged at %s, SINGLE_NODE_WRITER", pub, staging)
	}

	// The claim's stats are the driver's (NodeGetVolumeStats on the
	// publish path), in /stats/summary and /metrics.
	var fsst syscall.Statfs_t
	if err := syscall.Statfs(p.backing, &fsst); err != nil {
		t.Fatal(err)
	}
	capacity := fsst.Blocks * uint64(fsst.Bsize)
	code, body := httpGet(a.api(true) + "/stats/summary")
	var sum statsapi.Summary
	if err := json.Unmarshal([]byte(body), &sum); code != 200 || err != nil {
		t.Fatalf("/stats/summary: %d %v", code, err)
	}
	var got []string
	for _, ps := range sum.Pods {
		for _, v := range ps.VolumeStats {
			got = append(got, fmt.Sprintf("%s %s %+v %d", ps.PodRef.Name, v.Name, v.PVCRef, ptr.Deref(v.CapacityBytes, 0)))
		}
	}
	if want := fmt.Sprintf("writer data &{Name:data Namespace:%s} %d", ns, capacity); len(got) != 1 || got[0] != want {
		t.Errorf("volume stats %q, want only %q", got, want)
	}
	if n := p.count(t, "NodeGetVolumeStats", target); n < 1 {
		t.Errorf("the driver was not asked for the volume's stats")
	}
	_, metrics := httpGet(a.api(true) + "/metrics")
	if series := fmt.Sprintf(`kubelet_volume_stats_capacity_bytes{namespace="%s",persistentvolumeclaim="data"} %g`, ns, float64(capacity)); !strings.Contains(metrics, series) {
		t.Errorf("/metrics has no %s", series)
	}

	// A driver without a CSIDriver object needs attaching: the pod waits
	// for the VolumeAttachment that kube-controller-manager's attach/detach
	// controller makes (the node says it manages attachments), until the
	// attacher (the test here) marks it attached; its metadata is the
	// publish context.
	attacher := ns[len(ns)-6:] + ".attach.csi.example"
	p2 := startCSIPlugin(t, a, attacher)
	attPV, attHandle := "e2e-csi-att-"+ns, "att-"+ns
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claimOf("att", attPV), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	makeVolume(t, c, attPV, v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: attacher, VolumeHandle: attHandle}}, nil, ns, "att")
	ctr = sleepy("app")
	ctr.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	spec = onNode(a.node, ctr)
	spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "att"}}}}
	createPod(t, c, ns, "attached", spec)
	vaName := fmt.Sprintf("csi-%x", sha256.Sum256([]byte(attHandle+attacher+a.node)))
	waitFailedMount(t, c, ns, "attached", "volume attachment "+vaName+" is not attached yet")
	va, err := c.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if va.Spec.Attacher != attacher || va.Spec.NodeName != a.node || ptr.Deref(va.Spec.Source.PersistentVolumeName, "") != attPV {
		t.Errorf("VolumeAttachment %+v", va.Spec)
	}
	va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"device": "/dev/e2e"}}
	if _, err := c.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	att := waitPodPhase(t, c, ns, "attached", v1.PodRunning, startupWait)
	attTarget := filepath.Join(a.rootDir, "pods", string(att.UID), "volumes/kubernetes.io~csi", attPV, "mount")
	if pub := p2.only(t, "NodePublishVolume", attTarget); pub.PublishContext["device"] != "/dev/e2e" {
		t.Errorf("publish %+v, want the attachment's metadata as its publish context", pub)
	}
	if err := c.CoreV1().Pods(ns).Delete(ctx, "attached", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, startupWait, func() (bool, string) {
		return p2.count(t, "NodeUnstageVolume", "") == 1, "the attached volume is not unstaged"
	})

	// The agent restarts, and the inline volume's pod is deleted while it
	// is down: the running pod keeps its container and its volume; the
	// deleted one's volume, which the new agent never set up, is
	// unpublished from what its vol_data.json says.
	before := a.running("writer")["app"].ID
	a.stop(syscall.SIGTERM)
	if err := c.CoreV1().Pods(ns).Delete(ctx, "inline", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	a.start()
	waitFor(t, startupWait, func() (bool, string) {
		return p.count(t, "NodeUnpublishVolume", inlineTarget) == 1, "the inline volume of the pod deleted while the agent was down is not unpublished"
	})
	time.Sleep(3 * time.Second) // the restarted agent's first syncs of its pods
	if after := a.running("writer")["app"].ID; after != before {
		t.Errorf("the restart restarted the container: %s → %s", before, after)
	}
	if n := p.count(t, "NodeUnpublishVolume", target) + p.count(t, "NodeUnstageVolume", ""); n != 0 {
		t.Errorf("the restart unpublished or unstaged the running pod's volume %d times", n)
	}
	if out, err := cl.Kubectl("-n", ns, "exec", "writer", "--", "cat", "/data/f"); err != nil || out != "kept\n" {
		t.Errorf("after the restart the pod reads %q %v", out, err)
	}

	// Deletion: unpublished and unstaged, once each.
	if err := c.CoreV1().Pods(ns).Delete(ctx, "writer", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, startupWait, func() (bool, string) {
		n := p.count(t, "NodeUnpublishVolume", target) + p.count(t, "NodeUnstageVolume", staging)
		return n == 2, fmt.Sprintf("%d of the 2 teardown calls", n)
	})
	time.Sleep(3 * time.Second)
	for _, want := range []struct{ method, path string }{{"NodeUnpublishVolume", target}, {"NodeUnstageVolume", staging}, {"NodeUnpublishVolume", inlineTarget}} {
		p.only(t, want.method, want.path)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), filepath.Join(a.rootDir, "plugins")) ||
		strings.Contains(string(mounts), filepath.Join(a.rootDir, "pods")) {
		t.Errorf("mounts left under the root dir")
	}
}

// failedMounts is how many times the pod's FailedMount events were seen.
func failedMounts(t *testing.T, c kubernetes.Interface, ns, pod string) int {
	t.Helper()
	list, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=FailedMount,involvedObject.name=" + pod})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += int(max(e.Count, 1))
	}
	return n
}

// csiPlugin is a running test/csiplugin.
type csiPlugin struct {
	backing, calls string
}

// csiCall is a line of the plugin's calls file.
type csiCall struct {
	Method            string            `json:"method"`
	VolumeID          string            `json:"volumeId"`
	StagingTargetPath string            `json:"stagingTargetPath"`
	TargetPath        string            `json:"targetPath"`
	VolumeContext     map[string]string `json:"volumeContext"`
	PublishContext    map[string]string `json:"publishContext"`
	Mode              string            `json:"accessMode"`
}

// startCSIPlugin runs the test plugin for agent a's node, killed (and its
// sockets removed) at cleanup.
func startCSIPlugin(t *testing.T, a *agent, driver string) *csiPlugin {
	t.Helper()
	bin := builtTool(t, "ensure-csi-plugin.sh")
	sock, err := os.MkdirTemp("", "csi") // a socket's path has at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	p := &csiPlugin{backing: t.TempDir(), calls: filepath.Join(t.TempDir(), "calls.json")}
	logPath := filepath.Join(t.TempDir(), "plugin.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--driver-name", driver, "--csi-address", filepath.Join(sock, "csi.sock"),
		"--registration-dir", filepath.Join(a.rootDir, "plugins_registry"), "--backing", p.backing, "--calls", p.calls,
		"--node-id", "id-"+a.node, "--topology", "topology.e2e.csi.example/node="+a.node)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logf.Close()
		os.RemoveAll(sock)
		if t.Failed() {
			t.Logf("CSI plugin log:\n%s", tailFile(logPath, 30))
		}
	})
	return p
}

func (p *csiPlugin) read(t *testing.T) []csiCall {
	t.Helper()
	f, err := os.Open(p.calls)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []csiCall
	for s := bufio.NewScanner(f); s.Scan(); {
		var c csiCall
		if err := json.Unmarshal(s.Bytes(), &c); err != nil {
			t.Fatalf("calls file: %v", err)
		}
		out = append(out, c)
	}
	return out
}

// count counts the calls of a method on a path (target or staging; ""
// any).
func (p *csiPlugin) count(t *testing.T, method, path string) int {
	n := 0
	for _, c := range p.read(t) {
		if c.Method == method && (path == "" || c.TargetPath == path || (c.TargetPath == "" && c.StagingTargetPath == path)) {
			n++
		}
	}
	return n
}

// only is the one call of a method on a path; another number fails.
func (p *csiPlugin) only(t *testing.T, method, path string) csiCall {
	t.Helper()
	var got []csiCall
	for _, c := range p.read(t) {
		if c.Method == method && (c.TargetPath == path || (c.TargetPath == "" && c.StagingTargetPath == path)) {
			got = append(got, c)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d %s calls on %s, want 1 (all calls: %+v)", len(got), method, path, p.read(t))
	}
	return got[0]
}
