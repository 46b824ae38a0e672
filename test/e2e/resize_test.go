package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resizePod is a standalone pod's manifest: container app, resized in
// place (the default resizePolicy), and container rst, whose memory
// resizePolicy is RestartContainer, with app's and rst's resources.
func resizePod(name, appRes, rstRes string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: app, image: %s, imagePullPolicy: Never, command: [sleep, '100000'], resources: %s}
  - name: rst
    image: %s
    imagePullPolicy: Never
    command: [sleep, '100000']
    resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]
    resources: %s
`, name, testImage, appRes, testImage, rstRes)
}

// hogPod holds some 48 MiB of memory in a container limited to limit.
func hogPod(name, limit string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: hog
    image: %s
    imagePullPolicy: Never
    command: [awk, 'BEGIN{s=sprintf("%%50000000s","x"); while (1) system("sleep 1")}']
    resources: {limits: {memory: %s}}
`, name, testImage, limit)
}

// podJSON is the agent's view of pod name (/pods/default/<name>).
func (a *agent) podJSON(name string) *v1.Pod {
	a.t.Helper()
	code, body := httpGet(a.api(true) + "/pods/default/" + name)
	if code != 200 {
		return nil
	}
	var p v1.Pod
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		a.t.Fatalf("decode pod: %v", err)
	}
	return &p
}

// ctrStatus is the status of container name in p (nil: none).
func ctrStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	if p == nil {
		return nil
	}
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// podCondition is condition t of p (nil: absent).
func podCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	if p == nil {
		return nil
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// An edited manifest that changes only resources resizes the running
// containers in place (docker update: same container, restart count 0,
// the pod cgroup resized, the status's resources and allocatedResources
// the new ones); a container whose memory resizePolicy is RestartContainer
// is restarted once with its new limit. A resize past the node's
// allocatable stays pending (Infeasible), nothing changed; one that would
// change the QoS class is refused; a memory limit below what is in use
// stays in progress (reason Error), the container untouched.
func TestInPlaceResize(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("rsz.yaml", resizePod("rsz",
		"{requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}",
		"{requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 64Mi}}"))
	a.writeManifest("hog.yaml", hogPod("hog", "96Mi"))
	before := a.waitRunning("rsz", "app", "rst")
	hog := a.waitRunning("hog", "hog")["hog"].ID
	// The resize below must come once hog holds its memory.
	hogCgroup := inspect(t, hog).HostConfig.CgroupParent + "/" + hog
	waitFor(t, 10*time.Second, func() (bool, string) {
		used := readCgroup("memory", hogCgroup, "memory.usage_in_bytes")
		n, _ := strconv.ParseInt(used, 10, 64)
		return n > 40<<20, "hog uses " + used
	})

	a.writeManifest("rsz.yaml", resizePod("rsz",
		"{requests: {cpu: 200m, memory: 32Mi}, limits: {cpu: 400m, memory: 128Mi}}",
		"{requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 96Mi}}"))
	a.writeManifest("hog.yaml", hogPod("hog", "24Mi"))
	var pod *v1.Pod
	waitFor(t, 20*time.Second, func() (bool, string) {
		pod = a.podJSON("rsz")
		app, rst := ctrStatus(pod, "app"), ctrStatus(pod, "rst")
		if app == nil || rst == nil || app.Resources == nil || rst.State.Running == nil {
			return false, fmt.Sprintf("statuses %+v", pod)
		}
		lim := app.Resources.Limits
		return lim.Memory().String() == "128Mi" && lim.Cpu().String() == "400m" && rst.RestartCount == 1 &&
				podCondition(pod, v1.PodResizeInProgress) == nil,
			fmt.Sprintf("app resources %v, rst restarts %d, conditions %+v", app.Resources, rst.RestartCount, pod.Status.Conditions)
	})
	after := a.running("rsz")
	if after["app"].ID != before["app"].ID {
		t.Errorf("app was replaced (%.12s → %.12s): a resize with resizePolicy NotRequired is done in place", before["app"].ID, after["app"].ID)
	}
	if app := ctrStatus(pod, "app"); app.RestartCount != 0 || app.AllocatedResources.Cpu().String() != "200m" {
		t.Errorf("app: restartCount %d, allocatedResources %v; want 0 and cpu 200m", app.RestartCount, app.AllocatedResources)
	}
	d := inspect(t, after["app"].ID)
	if d.HostConfig.Memory != 128<<20 || d.HostConfig.CPUQuota != 40000 || d.HostConfig.CPUShares != 204 {
		t.Errorf("docker inspect app: memory %d, cpu quota %d, shares %d; want %d, 40000, 204",
			d.HostConfig.Memory, d.HostConfig.CPUQuota, d.HostConfig.CPUShares, 128<<20)
	}
	if after["rst"].ID == before["rst"].ID {
		t.Error("rst (memory resizePolicy RestartContainer) was not restarted")
	}
	if d := inspect(t, after["rst"].ID); d.HostConfig.Memory != 96<<20 {
		t.Errorf("docker inspect rst: memory %d, want %d", d.HostConfig.Memory, 96<<20)
	}
	if n := strings.Count(a.log(), "resizing container app"); n != 1 {
		t.Errorf("app resized %d times, want once (a sync that saw its old bounds updated it again)", n)
	}
	if !strings.Contains(a.log(), "Container rst resize requires restart") {
		t.Error("the agent's log does not say why rst was restarted")
	}
	// The pod cgroup (cgroup v1 with Docker's cgroupfs driver): memory is
	// the sum of the limits, CPU shares of the requests; rst has no CPU
	// limit, so the pod has none.
	if path := d.HostConfig.CgroupParent; path != "" && readCgroup("memory", path, "memory.limit_in_bytes") != "" {
		if got := readCgroup("memory", path, "memory.limit_in_bytes"); got != fmt.Sprint(224<<20) {
			t.Errorf("pod cgroup memory.limit_in_bytes %s, want %d", got, 224<<20)
		}
		if got := readCgroup("cpu", path, "cpu.shares"); got != "307" {
			t.Errorf("pod cgroup cpu.shares %s, want 307", got)
		}
	}

	// Past the node's allocatable: pending, Infeasible, nothing changes.
	a.writeManifest("rsz.yaml", resizePod("rsz",
		"{requests: {cpu: 200m, memory: 1Ti}, limits: {cpu: 400m, memory: 1Ti}}",
		"{requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 96Mi}}"))
	waitFor(t, 15*time.Second, func() (bool, string) {
		pod = a.podJSON("rsz")
		c := podCondition(pod, v1.PodResizePending)
		return c != nil && c.Reason == "Infeasible" && strings.HasPrefix(c.Message, "Node didn't have enough capacity: memory, requested: 1099545182208, capacity: "),
			fmt.Sprintf("conditions %+v", pod.Status.Conditions)
	})
	if app := ctrStatus(pod, "app"); app.Resources.Limits.Memory().Cmp(resource.MustParse("128Mi")) != 0 || app.AllocatedResources.Memory().String() != "32Mi" {
		t.Errorf("an infeasible resize changed app's status: resources %v, allocated %v", app.Resources, app.AllocatedResources)
	}
	if d := inspect(t, after["app"].ID); d.HostConfig.Memory != 128<<20 || !d.State.Running {
		t.Errorf("an infeasible resize changed app: running %v, memory %d", d.State.Running, d.HostConfig.Memory)
	}

	// A resize that would make the pod Guaranteed is refused; the file
	// keeps its last good pod (the one pending above).
	a.writeManifest("rsz.yaml", resizePod("rsz",
		"{requests: {cpu: 400m, memory: 128Mi}, limits: {cpu: 400m, memory: 128Mi}}",
		"{requests: {cpu: 100m, memory: 96Mi}, limits: {cpu: 100m, memory: 96Mi}}"))
	waitFor(t, 15*time.Second, func() (bool, string) {
		return strings.Contains(a.log(), "Pod QOS Class may not change as a result of resizing"), "no QoS refusal in the log"
	})
	if c := podCondition(a.podJSON("rsz"), v1.PodResizePending); c == nil {
		t.Error("the refused edit replaced the pending resize")
	}

	// Memory in use above the new limit: in progress, Error, untouched.
	waitFor(t, 15*time.Second, func() (bool, string) {
		p := a.podJSON("hog")
		c := podCondition(p, v1.PodResizeInProgress)
		return c != nil && c.Reason == "Error" && strings.Contains(c.Message, "less than current memory usage"),
			fmt.Sprintf("conditions %+v", p.Status.Conditions)
	})
	if d := inspect(t, hog); !d.State.Running || d.HostConfig.Memory != 96<<20 {
		t.Errorf("hog: running %v, memory %d; want running with its 96 MiB", d.State.Running, d.HostConfig.Memory)
	}
}

// Node mode: `kubectl patch --subresource resize` changes the pod's spec
// in the API server; the agent resizes the container in place and reports
// the applied resources, with observedGeneration the pod's new
// generation, on the status and on its conditions.
func TestNodeInPlaceResize(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	app := sleepy("app")
	app.Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	createPod(t, c, ns, "app", onNode(a.node, app))
	waitPodPhase(t, c, ns, "app", v1.PodRunning, startupWait)
	first := a.running("app")["app"].ID

	resize := func(res string) {
		t.Helper()
		if out, err := cl.Kubectl("-n", ns, "patch", "pod", "app", "--subresource", "resize", "--patch",
			`{"spec":{"containers":[{"name":"app","resources":`+res+`}]}}`); err != nil {
			t.Fatalf("kubectl patch --subresource resize: %v %s", err, out)
		}
	}
	get := func() *v1.Pod {
		p, err := c.CoreV1().Pods(ns).Get(context.Background(), "app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	resize(`{"requests":{"cpu":"150m","memory":"32Mi"},"limits":{"cpu":"300m","memory":"96Mi"}}`)
	waitFor(t, 30*time.Second, func() (bool, string) {
		p := get()
		st := ctrStatus(p, "app")
		if st == nil || st.Resources == nil {
			return false, "no resources in the status"
		}
		return st.Resources.Limits.Memory().String() == "96Mi" && st.Resources.Limits.Cpu().String() == "300m" &&
				p.Status.ObservedGeneration == p.Generation && podCondition(p, v1.PodResizeInProgress) == nil,
			fmt.Sprintf("resources %v, observedGeneration %d of %d, conditions %+v", st.Resources, p.Status.ObservedGeneration, p.Generation, p.Status.Conditions)
	})
	if now := a.running("app")["app"].ID; now != first {
		t.Errorf("container replaced (%.12s → %.12s), want resized in place", first, now)
	}
	if d := inspect(t, first); d.HostConfig.Memory != 96<<20 || d.HostConfig.CPUQuota != 30000 {
		t.Errorf("docker inspect: memory %d, cpu quota %d; want %d, 30000", d.HostConfig.Memory, d.HostConfig.CPUQuota, 96<<20)
	}
	if st := ctrStatus(get(), "app"); st.RestartCount != 0 || st.AllocatedResources.Cpu().String() != "150m" {
		t.Errorf("restartCount %d, allocatedResources %v; want 0, cpu 150m", st.RestartCount, st.AllocatedResources)
	}

	// The API server itself refuses a resize past the node's allocatable
	// (the kubelet's Infeasible is seen standalone: TestInPlaceResize).
	if p := get(); podCondition(p, v1.PodReady) == nil || podCondition(p, v1.PodReady).ObservedGeneration != p.Generation {
		t.Errorf("Ready %+v, want its observedGeneration the pod's generation %d", podCondition(p, v1.PodReady), p.Generation)
	}
}
