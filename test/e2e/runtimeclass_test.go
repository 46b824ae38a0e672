package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// createRuntimeClass makes a RuntimeClass (cluster-scoped: named after the
// test's node, so tests never share one) and deletes it at the end.
func createRuntimeClass(t *testing.T, c kubernetes.Interface, name, handler string, overhead v1.ResourceList) {
	t.Helper()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
	if overhead != nil {
		rc.Overhead = &nodev1.Overhead{PodFixed: overhead}
	}
	if _, err := c.NodeV1().RuntimeClasses().Create(context.Background(), rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.NodeV1().RuntimeClasses().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// podCgroupFile reads a file of the pod cgroup parent on the memory or cpu
// controller: v1 (cgroupfs) by its hierarchy's name, v2 by its own name.
// ok is false where Docker's driver is systemd (the parent is a slice name
// the unit tests of pkg/kubelet/cgroups cover).
func podCgroupFile(parent, v1Hierarchy, v1File, v2File string) (string, bool) {
	if !strings.HasPrefix(parent, "/") {
		return "", false
	}
	if _, err := os.Stat(filepath.Join(cgroupMount, "memory")); err == nil {
		return readCgroup(v1Hierarchy, parent, v1File), true
	}
	data, err := os.ReadFile(filepath.Join(cgroupMount, parent, v2File))
	return strings.TrimSpace(string(data)), err == nil
}

// A RuntimeClass whose handler is runc runs the pod on Docker's runc, every
// container of it (the infra one too); the overhead the API server's
// admission put on the pod is added to the pod cgroup's limits.
func TestRuntimeClassRunsPodWithHandlerAndOverhead(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	class := "rc-" + a.node
	createRuntimeClass(t, c, class, "runc", v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("16Mi")})
	app := sleepy("app")
	app.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	spec := onNode(a.node, app)
	spec.RuntimeClassName = &class
	if p := createPod(t, c, ns, "withclass", spec); p.Spec.Overhead == nil {
		t.Fatalf("the API server's RuntimeClass admission set no overhead on the pod")
	}
	waitPodPhase(t, c, ns, "withclass", v1.PodRunning, startupWait)
	cs := a.containers("withclass")
	if len(cs) != 2 {
		t.Fatalf("%d containers, want the infra one and app", len(cs))
	}
	var parent string
	for _, ct := range cs {
		d := inspect(t, ct.ID)
		if d.HostConfig.Runtime != "runc" {
			t.Errorf("container %s runs on %q, want runc", d.Name, d.HostConfig.Runtime)
		}
		parent = d.HostConfig.CgroupParent
	}
	// Guaranteed: 200m + 100m of CPU, 64 + 16 MiB of memory.
	if mem, ok := podCgroupFile(parent, "memory", "memory.limit_in_bytes", "memory.max"); ok && mem != fmt.Sprint(80<<20) {
		t.Errorf("pod cgroup %s memory limit %q, want %d (the limit and the overhead)", parent, mem, 80<<20)
	}
	if cpu, ok := podCgroupFile(parent, "cpu", "cpu.cfs_quota_us", "cpu.max"); ok && cpu != "30000" && cpu != "30000 100000" {
		t.Errorf("pod cgroup %s CPU quota %q, want 30000 (the limit and the overhead)", parent, cpu)
	}
}

// A RuntimeClass whose handler Docker lacks fails the pod's sandbox, as the
// kubelet on cri-dockerd: FailedCreatePodSandBox naming the handler, the
// containers waiting in ContainerCreating; between its retries the agent
// makes no Docker call but the relist's. The calls are counted by the
// agent's own metrics, which other tests do not move: it runs beside them.
func TestRuntimeClassUnknownHandlerCostsNothing(t *testing.T) {
	t.Parallel()
	const window = 10 * time.Second
	cl := sharedCluster(t)
	a := startNode(t, "--backoff-initial", "30s", "--backoff-max", "30s")
	c, ns := readyNode(t, cl, a)
	class := "rc-bad-" + a.node
	createRuntimeClass(t, c, class, "no-such-runtime", nil)
	spec := onNode(a.node, sleepy("app"))
	spec.RuntimeClassName = &class
	createPod(t, c, ns, "badclass", spec)
	want := `Failed to create pod sandbox: RuntimeHandler "no-such-runtime" not supported`
	waitFor(t, 60*time.Second, func() (bool, string) {
		l, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=badclass,reason=FailedCreatePodSandBox"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range l.Items {
			if e.Message == want && e.Type == v1.EventTypeWarning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %+v, want %q", l.Items, want)
	})
	waitFor(t, 20*time.Second, func() (bool, string) {
		p, err := c.CoreV1().Pods(ns).Get(context.Background(), "badclass", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := p.Status.ContainerStatuses
		return p.Status.Phase == v1.PodPending && len(st) == 1 && st[0].State.Waiting != nil && st[0].State.Waiting.Reason == "ContainerCreating",
			fmt.Sprintf("pod %s, statuses %+v; want Pending, app waiting in ContainerCreating", p.Status.Phase, st)
	})
	if cs := a.containers("badclass"); len(cs) != 0 {
		t.Errorf("%d containers, want none: the sandbox fails before any is created", len(cs))
	}
	// Every Docker call the agent makes, by kind. The node's own periodic
	// calls are no pod's cost: the relist's container lists and the image
	// filesystem's usage (stats, eviction signals).
	kinds := []string{"list_containers", "image_fs_info", "container_status", "create_container", "start_container",
		"stop_container", "remove_container", "image_status", "pull_image", "remove_image", "exec", "exec_sync",
		"container_logs", "attach", "build_image", "get_container_events"}
	count := func() map[string]float64 {
		m := map[string]float64{}
		for _, k := range kinds {
			m[k] = a.metric("kubelet_runtime_operations_total", map[string]string{"operation_type": k})
		}
		return m
	}
	attempts := a.attempts()
	before, t0 := count(), time.Now()
	time.Sleep(window)
	after := count()
	delta, pods := map[string]float64{}, 0.0
	for _, k := range kinds {
		if d := after[k] - before[k]; d > 0 {
			delta[k] = d
			if k != "list_containers" && k != "image_fs_info" {
				pods += d
			}
		}
	}
	t.Logf("unknown handler: Docker calls in %v: %v", time.Since(t0).Round(time.Millisecond), delta)
	if limit := float64(window/(5*time.Second)) + 2; delta["list_containers"] > limit || pods > 0 {
		t.Errorf("Docker calls in %v while waiting: %v; want only the node's own: the relist's lists (at most %v) and the image filesystem's usage",
			window, delta, limit)
	}
	if got := a.attempts(); got != attempts {
		t.Errorf("%v attempts while waiting for a back-off of 30 s, want none", got-attempts)
	}
}

// The Node reports Docker's runtimes as its runtime handlers, its largest
// images (at most --node-status-max-images), its features and the
// features it declares.
func TestNodeStatusRuntimeHandlersAndImages(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t, "--node-status-max-images", "3")
	c := cl.Admin()
	waitNodeReady(t, c, a.node, startupWait)
	var n *v1.Node
	waitFor(t, 30*time.Second, func() (bool, string) {
		var err error
		if n, err = c.CoreV1().Nodes().Get(context.Background(), a.node, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return len(n.Status.RuntimeHandlers) > 0 && len(n.Status.Images) > 0,
			fmt.Sprintf("runtimeHandlers %+v, %d images", n.Status.RuntimeHandlers, len(n.Status.Images))
	})
	var handlers []string
	for _, h := range n.Status.RuntimeHandlers {
		handlers = append(handlers, h.Name)
		if h.Features == nil || h.Features.RecursiveReadOnlyMounts == nil || h.Features.UserNamespaces == nil {
			t.Errorf("handler %q features %+v, want both stated", h.Name, h.Features)
		}
	}
	if !slices.Contains(handlers, "") || !slices.Contains(handlers, "runc") {
		t.Errorf("runtimeHandlers %q, want the default one and runc", handlers)
	}
	images := n.Status.Images
	if len(images) > 3 {
		t.Errorf("%d images, want at most --node-status-max-images 3", len(images))
	}
	for i, img := range images {
		if len(img.Names) == 0 || len(img.Names) > 5 || (i > 0 && img.SizeBytes > images[i-1].SizeBytes) {
			t.Errorf("images %+v, want the largest first, each with one to five names", images)
			break
		}
	}
	if f := n.Status.Features; f == nil || f.SupplementalGroupsPolicy == nil || *f.SupplementalGroupsPolicy {
		t.Errorf("features %+v, want supplementalGroupsPolicy false", f)
	}
	if !slices.Contains(n.Status.DeclaredFeatures, "ExtendWebSocketsToKubelet") {
		t.Errorf("declaredFeatures %q, want ExtendWebSocketsToKubelet", n.Status.DeclaredFeatures)
	}
}
