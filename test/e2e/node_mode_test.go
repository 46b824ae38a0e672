package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/classic-kubelet/kubelet/test/cluster"
)

// The node-mode tests run the agent as a node of the real control plane
// (test/cluster: kube-apiserver, kube-controller-manager and
// kube-scheduler v1.37.2 on Debian's etcd), one shared by the tests of a
// run; each test works in a namespace of its own on nodes of its own.

// readyNode waits for agent a to be a Ready node of cl and returns the
// cluster's admin client and a namespace of the test's own.
func readyNode(t *testing.T, cl *cluster.Cluster, a *agent) (kubernetes.Interface, string) {
	t.Helper()
	c := cl.Admin()
	waitNodeReady(t, c, a.node, startupWait)
	return c, testNamespace(t, cl)
}

// onNode is a pod spec pinned to a node (the scheduler is not needed).
func onNode(node string, containers ...v1.Container) v1.PodSpec {
	return v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To(int64(2)), Containers: containers,
		Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}}}
}

func sleepy(name string) v1.Container {
	return v1.Container{Name: name, Image: testImage, Command: []string{"sleep", "100000"}, ImagePullPolicy: v1.PullNever}
}

func createPod(t *testing.T, c kubernetes.Interface, ns, name string, spec v1.PodSpec) *v1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods(ns).Create(context.Background(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitPodPhase waits for the pod's phase as the API server shows it.
func waitPodPhase(t *testing.T, c kubernetes.Interface, ns, name string, phase v1.PodPhase, timeout time.Duration) *v1.Pod {
	t.Helper()
	var p *v1.Pod
	waitFor(t, timeout, func() (bool, string) {
		var err error
		p, err = c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == phase, fmt.Sprintf("pod %s/%s phase %q reason %q message %q", ns, name, p.Status.Phase, p.Status.Reason, p.Status.Message)
	})
	return p
}

func getNode(t *testing.T, c kubernetes.Interface, name string) *v1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// waitPodsRunning waits until n pods of ns are Running (and Ready, if
// ready) in the API server.
func waitPodsRunning(t *testing.T, c kubernetes.Interface, ns string, n int, ready bool, timeout time.Duration) {
	t.Helper()
	what := "Running"
	if ready {
		what = "Running and Ready"
	}
	waitFor(t, timeout, func() (bool, string) {
		l, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := 0
		for _, p := range l.Items {
			if p.Status.Phase == v1.PodRunning && (!ready || podReady(&p)) {
				got++
			}
		}
		return got == n, fmt.Sprintf("%d of %d %s", got, n, what)
	})
}

// startupWait bounds a new agent's start and its first pods: beside the
// parallel tests (six agents, private control planes) on two cores, a
// pod's first start has taken over 30 s.
const startupWait = 2 * time.Minute

func waitNodeReady(t *testing.T, c kubernetes.Interface, name string, timeout time.Duration) *v1.Node {
	t.Helper()
	var n *v1.Node
	waitFor(t, timeout, func() (bool, string) {
		var err error
		n, err = c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return nodeReady(n), fmt.Sprintf("node %s conditions %+v", name, n.Status.Conditions)
	})
	return n
}

// The node registers Ready with the kubelet's status, and its Lease is
// renewed every quarter of its duration with the Node as owner.
func TestNodeRegistersAndRenewsLease(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	c := cl.Admin()
	a := startNode(t, "--node-lease-duration-seconds", "8", "--max-pods", "50", "--node-labels", "example.com/pool=e2e",
		"--register-with-taints", "example.com/dedicated=e2e:NoSchedule")
	n := waitNodeReady(t, c, a.node, startupWait)
	if got := n.Status.Capacity[v1.ResourcePods]; got.Value() != 50 {
		t.Errorf("capacity pods %v, want --max-pods 50", got.String())
	}
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		if q := n.Status.Allocatable[r]; q.Sign() <= 0 {
			t.Errorf("allocatable %s = %v", r, q.String())
		}
	}
	var internal string
	for _, addr := range n.Status.Addresses {
		if addr.Type == v1.NodeInternalIP {
			internal = addr.Address
		}
	}
	if internal != cl.Address {
		t.Errorf("addresses %+v, want InternalIP %s", n.Status.Addresses, cl.Address)
	}
	info := n.Status.NodeInfo
	if !strings.HasPrefix(info.ContainerRuntimeVersion, "docker://") || info.BootID == "" || info.KernelVersion == "" || info.MachineID == "" {
		t.Errorf("nodeInfo %+v", info)
	}
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
		t.Errorf("no daemonEndpoints.kubeletEndpoint.port")
	}
	if n.Labels["example.com/pool"] != "e2e" || n.Labels["kubernetes.io/hostname"] != a.node {
		t.Errorf("labels %v", n.Labels)
	}
	if len(n.Spec.Taints) == 0 || n.Spec.Taints[0].Key != "example.com/dedicated" {
		t.Errorf("taints %+v", n.Spec.Taints)
	}
	for _, want := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		found := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == want && cond.Status == v1.ConditionFalse && !cond.LastHeartbeatTime.IsZero() && !cond.LastTransitionTime.IsZero() {
				found = true
			}
		}
		if !found {
			t.Errorf("condition %s missing or without times: %+v", want, n.Status.Conditions)
		}
	}
	// The kubelet's node events, on the Node, in the default namespace.
	waitFor(t, 20*time.Second, func() (bool, string) {
		l, err := c.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + a.node})
		if err != nil {
			return false, err.Error()
		}
		reasons := map[string]bool{}
		for _, e := range l.Items {
			reasons[e.Reason] = e.Source.Component == "kubelet"
		}
		for _, want := range []string{"Starting", "NodeReady", "NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"} {
			if !reasons[want] {
				return false, fmt.Sprintf("node events %v (reason: from the kubelet), want %s", reasons, want)
			}
		}
		return true, ""
	})
	leases := c.CoordinationV1().Leases(v1.NamespaceNodeLease)
	var first time.Time
	waitFor(t, 20*time.Second, func() (bool, string) {
		l, err := leases.Get(context.Background(), a.node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.RenewTime == nil {
			return false, "no renew time"
		}
		if first.IsZero() {
			first = l.Spec.RenewTime.Time
		}
		owned := len(l.OwnerReferences) == 1 && l.OwnerReferences[0].Kind == "Node" && l.OwnerReferences[0].UID == n.UID
		return owned && l.Spec.RenewTime.Time.After(first) && *l.Spec.LeaseDurationSeconds == 8 && *l.Spec.HolderIdentity == a.node,
			fmt.Sprintf("lease %+v owners %+v (first renewal %v)", l.Spec, l.OwnerReferences, first)
	})
}

// A Deployment's pods run on the node with pod IPs; scaled to 0 they are
// gone from Docker and from the API server.
func TestNodeRunsDeployment(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					NodeSelector:                  map[string]string{"kubernetes.io/hostname": a.node},
					TerminationGracePeriodSeconds: ptr.To(int64(2)),
					Containers:                    []v1.Container{{Name: "web", Image: testImage, ImagePullPolicy: v1.PullNever}},
				},
			},
		},
	}
	ctx := context.Background()
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() (bool, string) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		var states []string
		for _, p := range pods.Items {
			states = append(states, fmt.Sprintf("%s %s %s %q %s", p.Name, p.Status.Phase, p.Status.PodIP, p.Status.Message, p.Spec.NodeName))
			if p.Status.Phase == v1.PodRunning && p.Status.PodIP != "" && podReady(&p) {
				running++
			}
		}
		return running == 3 && len(pods.Items) == 3, strings.Join(states, "; ")
	})
	// The pods' events reach the API server, from the kubelet on this node.
	waitFor(t, 30*time.Second, func() (bool, string) {
		evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		started := map[string]bool{}
		var seen []string
		for _, e := range evs.Items {
			seen = append(seen, e.Reason+" "+e.InvolvedObject.Name+" from "+e.Source.Component+"/"+e.Source.Host)
			if e.Reason == "Started" && e.InvolvedObject.Kind == "Pod" && e.Source.Component == "kubelet" && e.Source.Host == a.node {
				started[e.InvolvedObject.Name] = true
			}
		}
		return len(started) == 3, fmt.Sprintf("Started events of %d pods; events: %s", len(started), strings.Join(seen, "; "))
	})
	// A merge patch of the scale carries no resourceVersion, so it never
	// conflicts with the Deployment controller's own updates.
	if _, err := c.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`),
		metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() (bool, string) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		left := 0
		list, err := dockerc.ListContainers(docker.ListContainersOptions{All: true, Filters: map[string][]string{"label": {
			ownerLabel + "=" + a.node, "io.kubernetes.pod.namespace=" + ns}}})
		if err != nil {
			return false, err.Error()
		}
		left = len(list)
		return len(pods.Items) == 0 && left == 0, fmt.Sprintf("%d pods in the API, %d containers in Docker", len(pods.Items), left)
	})
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// The updates the API server allows on a running pod are honoured: a new
// image restarts the container on it (the restart counted), and an
// activeDeadlineSeconds set later ends the pod (Failed, DeadlineExceeded).
func TestNodeHonoursPodUpdates(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	ctx := context.Background()
	var b [4]byte
	_, _ = rand.Read(b[:])
	repo := "classic-kubelet/e2e-update-" + hex.EncodeToString(b[:])
	if err := dockerc.TagImage(testImage, docker.TagImageOptions{Repo: repo, Tag: "2"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dockerc.RemoveImageExtended(repo+":2", docker.RemoveImageOptions{NoPrune: true}) })
	createPod(t, c, ns, "app", onNode(a.node, sleepy("app")))
	waitPodPhase(t, c, ns, "app", v1.PodRunning, startupWait)
	first := a.running("app")["app"].ID

	patch := func(body string) {
		t.Helper()
		if _, err := c.CoreV1().Pods(ns).Patch(ctx, "app", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"spec":{"containers":[{"name":"app","image":"` + repo + `:2"}]}}`)
	waitFor(t, 60*time.Second, func() (bool, string) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, fmt.Sprint(err)
		}
		st := p.Status.ContainerStatuses[0]
		now := a.running("app")["app"]
		return now.ID != "" && now.ID != first && now.Image == repo+":2" && st.Image == repo+":2" && st.RestartCount == 1 && st.Ready,
			fmt.Sprintf("container %.12s image %s; status image %s restarts %d ready %v", now.ID, now.Image, st.Image, st.RestartCount, st.Ready)
	})

	patch(`{"spec":{"activeDeadlineSeconds":5}}`)
	p := waitPodPhase(t, c, ns, "app", v1.PodFailed, 60*time.Second)
	if p.Status.Reason != "DeadlineExceeded" {
		t.Errorf("pod past its activeDeadlineSeconds: reason %q message %q, want DeadlineExceeded", p.Status.Reason, p.Status.Message)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		left := len(a.running("app"))
		return left == 0, fmt.Sprintf("%d containers of the failed pod running", left)
	})
}

// kubectl delete of a pod whose container ignores SIGTERM finishes at the
// grace period, its containers stopped; the pod never hangs Terminating.
func TestNodeDeletePodHonoursGrace(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	spec := onNode(a.node, v1.Container{Name: "stubborn", Image: testImage, ImagePullPolicy: v1.PullNever,
		Command: []string{"sh", "-c", "trap '' TERM; while true; do sleep 1; done"}})
	spec.TerminationGracePeriodSeconds = ptr.To(int64(30))
	createPod(t, c, ns, "stubborn", spec)
	waitPodPhase(t, c, ns, "stubborn", v1.PodRunning, startupWait)
	start := time.Now()
	if err := c.CoreV1().Pods(ns).Delete(context.Background(), "stubborn", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(4))}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, err := c.CoreV1().Pods(ns).Get(context.Background(), "stubborn", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	took := time.Since(start)
	t.Logf("deleted with grace 4 s in %v", took.Round(time.Millisecond))
	// About 4 s, well short of the pod's own 30 s (Docker can be slow to
	// answer under the parallel tests).
	if took < 3500*time.Millisecond || took > 20*time.Second {
		t.Errorf("deletion took %v, want about the 4 s grace period, not the pod's 30 s", took)
	}
	if r := a.running("stubborn"); len(r) > 0 {
		t.Errorf("containers still running after the deletion: %v", keys(r))
	}
}

// kubectl logs, exec, attach and port-forward reach the agent through the
// API server (which authenticates to it with its kubelet client
// certificate); so do the stats and resource metrics endpoints.
func TestNodeKubectlThroughAPIServer(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	createPod(t, c, ns, "web", onNode(a.node, v1.Container{Name: "web", Image: testImage, ImagePullPolicy: v1.PullNever,
		Stdin: true}))
	createPod(t, c, ns, "cat", onNode(a.node, v1.Container{Name: "cat", Image: testImage, ImagePullPolicy: v1.PullNever,
		Command: []string{"cat"}, Stdin: true, StdinOnce: true}))
	// ticker writes a line every 200 ms and ends after a second, to be
	// restarted: logs -f follows it, logs --previous reads its last run.
	createPod(t, c, ns, "ticker", onNode(a.node, v1.Container{Name: "ticker", Image: testImage, ImagePullPolicy: v1.PullNever,
		Command: []string{"sh", "-c", "for i in 1 2 3 4 5; do echo tick-$i; sleep 0.2; done; exit 1"}}))
	createPod(t, c, ns, "stream", onNode(a.node, v1.Container{Name: "stream", Image: testImage, ImagePullPolicy: v1.PullNever,
		Command: []string{"sh", "-c", "i=0; while true; do echo line-$i; i=$((i+1)); sleep 0.1; done"}}))
	waitPodPhase(t, c, ns, "web", v1.PodRunning, startupWait)
	waitPodPhase(t, c, ns, "cat", v1.PodRunning, startupWait)
	waitPodPhase(t, c, ns, "stream", v1.PodRunning, startupWait)
	// attach: the container's stdin from kubectl's, its stdout back.
	if out, err := kubectlStdin(cl, "hello through attach\n", "-n", ns, "attach", "-i", "cat", "-c", "cat"); !strings.Contains(out, "hello through attach") {
		t.Errorf("kubectl attach -i: %v %q", err, out)
	}
	out, err := cl.Kubectl("-n", ns, "logs", "web")
	if err != nil || !strings.Contains(out, "listening") {
		t.Errorf("kubectl logs: %v %q", err, out)
	}
	out, err = cl.Kubectl("-n", ns, "exec", "web", "--", "sh", "-c", "echo out-$((6*7)); echo err >&2; exit 3")
	if !strings.Contains(out, "out-42") || err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("kubectl exec: %v %q", err, out)
	}
	out, err = kubectlStdin(cl, "ping\n", "-n", ns, "exec", "-i", "web", "--", "cat")
	if err != nil || strings.TrimSpace(out) != "ping" {
		t.Errorf("kubectl exec -i: %v %q", err, out)
	}
	// exec -it: a terminal of its own in the container (script gives
	// kubectl the terminal it wants on its side).
	kubectlCmd := fmt.Sprintf("%s --kubeconfig %s -n %s exec -it web -- sh -c 'tty; echo rows-$(stty size)'", cl.KubectlPath(), cl.AdminKubeconfig, ns)
	tty, err := exec.Command("script", "-qec", kubectlCmd, "/dev/null").CombinedOutput()
	if err != nil || !strings.Contains(string(tty), "/dev/pts/") || !strings.Contains(string(tty), "rows-") {
		t.Errorf("kubectl exec -it: %v %q", err, tty)
	}
	kubectlDebug(t, cl, c, a, ns, "web")
	// logs --previous: the ticker's last run, once it was restarted.
	waitFor(t, 60*time.Second, func() (bool, string) {
		p, err := c.CoreV1().Pods(ns).Get(context.Background(), "ticker", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, fmt.Sprint(err)
		}
		return p.Status.ContainerStatuses[0].RestartCount >= 1, fmt.Sprintf("ticker restarts %d", p.Status.ContainerStatuses[0].RestartCount)
	})
	if out, err := cl.Kubectl("-n", ns, "logs", "--previous", "ticker"); err != nil || !strings.Contains(out, "tick-5") {
		t.Errorf("kubectl logs --previous: %v %q", err, out)
	}
	// logs -f: lines written after kubectl started reach it (3 s of a line
	// every 100 ms: well past the last line already written).
	lastLine := func(out string) int {
		n := -1
		for _, l := range strings.Fields(out) {
			if v, err := strconv.Atoi(strings.TrimPrefix(l, "line-")); err == nil && v > n {
				n = v
			}
		}
		return n
	}
	out, _ = cl.Kubectl("-n", ns, "logs", "stream")
	before := lastLine(out)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	follow, _ := exec.CommandContext(ctx, cl.KubectlPath(), "--kubeconfig", cl.AdminKubeconfig, "-n", ns, "logs", "-f", "stream").Output()
	cancel()
	if after := lastLine(string(follow)); before < 0 || after < before+10 {
		t.Errorf("kubectl logs -f: last line %d before, %d followed, want at least 10 more", before, after)
	}
	a.waitStats()
	for _, path := range []string{"stats/summary", "metrics/resource"} {
		out, err = cl.Kubectl("get", "--raw", "/api/v1/nodes/"+a.node+"/proxy/"+path)
		if err != nil || !strings.Contains(out, "web") {
			t.Errorf("%s through the API server: %v %.300s", path, err, out)
		}
	}
	// port-forward: the API server streams to the agent, which dials the
	// pod's port inside its network namespace.
	local := freePort(t)
	pf, err := kubectlStart(cl, "-n", ns, "port-forward", "pod/web", fmt.Sprintf("%d:8080", local))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.stop()
	waitFor(t, 20*time.Second, func() (bool, string) {
		code, body := httpGet(fmt.Sprintf("http://127.0.0.1:%d/", local))
		return code == 200, fmt.Sprintf("%d %.100s", code, body)
	})
}

// kubectlDebug adds two ephemeral containers to the running pod name (its
// one container is name too): kubectl debug's, in the target's PID
// namespace, which lists its processes and exits, and, as the
// NodeConformance spec adds it, one with a terminal that prints "polo"
// until stopped. Each is started once, never restarted, shows in
// ephemeralContainerStatuses, and exec and logs reach it by name; the
// pod's own container runs on untouched.
func kubectlDebug(t *testing.T, cl *cluster.Cluster, c kubernetes.Interface, a *agent, ns, name string) {
	t.Helper()
	ctx := context.Background()
	app := a.running(name)[name].ID
	if out, err := cl.Kubectl("-n", ns, "debug", name, "--image", testImage, "--image-pull-policy", "Never",
		"--target", name, "--container", "ps", "--", "ps"); err != nil {
		t.Fatalf("kubectl debug: %v %q", err, out)
	}
	ephemeral := func(p *v1.Pod, ec string) *v1.ContainerStatus {
		for i := range p.Status.EphemeralContainerStatuses {
			if p.Status.EphemeralContainerStatuses[i].Name == ec {
				return &p.Status.EphemeralContainerStatuses[i]
			}
		}
		return nil
	}
	waitFor(t, 60*time.Second, func() (bool, string) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := ephemeral(p, "ps")
		return st != nil && st.State.Terminated != nil && st.State.Terminated.ExitCode == 0, fmt.Sprintf("ephemeral statuses %+v", p.Status.EphemeralContainerStatuses)
	})
	// The target's PID namespace: its server's process is listed.
	if out, err := cl.Kubectl("-n", ns, "logs", name, "-c", "ps"); err != nil || !strings.Contains(out, "testserver") {
		t.Errorf("kubectl logs of the debug container (ps in the target's PID namespace): %v %q", err, out)
	}

	p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: "polo", Image: testImage, ImagePullPolicy: v1.PullNever, Stdin: true, TTY: true,
		Command: []string{"sh", "-c", "while true; do echo polo; sleep 1; done"}}})
	if _, err := c.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, name, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() (bool, string) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := ephemeral(p, "polo")
		return st != nil && st.State.Running != nil, fmt.Sprintf("ephemeral statuses %+v", p.Status.EphemeralContainerStatuses)
	})
	if out, err := cl.Kubectl("-n", ns, "exec", name, "-c", "polo", "--", "echo", "marco"); err != nil || !strings.Contains(out, "marco") {
		t.Errorf("kubectl exec in the ephemeral container: %v %q", err, out)
	}
	waitFor(t, 20*time.Second, func() (bool, string) {
		out, err := cl.Kubectl("-n", ns, "logs", name, "-c", "polo")
		return err == nil && strings.Contains(out, "polo"), fmt.Sprintf("kubectl logs of the terminal's container: %v %q", err, out)
	})

	p, err = c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := ephemeral(p, "ps"); st == nil || st.State.Terminated == nil || st.RestartCount != 0 {
		t.Errorf("the debug container that exited: %+v, want terminated and never restarted", st)
	}
	if n := len(a.instances(name, "ps")); n != 1 {
		t.Errorf("%d instances of the debug container that exited, want 1 (never restarted)", n)
	}
	if now := a.running(name)[name].ID; now != app || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the pod's container was %.12s, is %.12s (restarts %d): adding ephemeral containers must leave it alone",
			app, now, p.Status.ContainerStatuses[0].RestartCount)
	}

	// The sandbox dies under the running debug container: it is stopped
	// with the old sandbox and not started in the new one, as the kubelet's.
	infra := a.running(name)["POD"].ID
	if err := dockerc.KillContainer(docker.KillContainerOptions{ID: infra}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() (bool, string) {
		run := a.running(name)
		_, polo := run["polo"]
		return run["POD"].ID != "" && run["POD"].ID != infra && run[name].ID != "" && !polo,
			fmt.Sprintf("after the sandbox's kill: running %v", slices.Collect(maps.Keys(run)))
	})
	if n := len(a.instances(name, "polo")); n != 1 {
		t.Errorf("%d instances of the debug container after its sandbox was replaced, want 1 (never started again)", n)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := ephemeral(p, "polo")
		return st != nil && st.State.Terminated != nil && p.Status.Phase == v1.PodRunning,
			fmt.Sprintf("phase %s, ephemeral statuses %+v", p.Status.Phase, p.Status.EphemeralContainerStatuses)
	})
}

// Two agents (two node names on the one Docker daemon) join the cluster;
// the scheduler spreads a Deployment over both and a pod on one reaches a
// pod on the other by its pod IP.
func TestTwoNodesShareACluster(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	c := cl.Admin()
	a, b := startNode(t), startNode(t)
	waitNodeReady(t, c, a.node, startupWait)
	waitNodeReady(t, c, b.node, startupWait)
	ns := testNamespace(t, cl)
	ctx := context.Background()
	labels := map[string]string{"app": "spread"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "spread"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(4)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(2)),
					Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
						NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
							Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{a.node, b.node}}}}}}}},
					TopologySpreadConstraints: []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
						WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
					Containers: []v1.Container{{Name: "web", Image: testImage, ImagePullPolicy: v1.PullNever}},
				},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []v1.Pod
	waitFor(t, startupWait, func() (bool, string) {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods = l.Items
		per := map[string]int{}
		for _, p := range pods {
			if p.Status.Phase == v1.PodRunning && p.Status.PodIP != "" {
				per[p.Spec.NodeName]++
			}
		}
		return per[a.node] == 2 && per[b.node] == 2, fmt.Sprintf("running per node %v", per)
	})
	var from, to *v1.Pod
	for i := range pods {
		if pods[i].Spec.NodeName == a.node && from == nil {
			from = &pods[i]
		}
		if pods[i].Spec.NodeName == b.node && to == nil {
			to = &pods[i]
		}
	}
	out, err := cl.Kubectl("-n", ns, "exec", from.Name, "--", "wget", "-q", "-O-", "http://"+to.Status.PodIP+":8080/")
	if err != nil || out == "" {
		t.Errorf("pod %s on %s → %s (%s) on %s: %v %q", from.Name, a.node, to.Name, to.Status.PodIP, b.node, err, out)
	}
}

// Killed with -9 and restarted, the agent recreates no container and
// never writes a regressed status; a Node an operator deletes is
// registered again.
func TestNodeRestartAndNodeDeleted(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	createPod(t, c, ns, "keep", onNode(a.node, sleepy("app")))
	done := onNode(a.node, v1.Container{Name: "once", Image: testImage, ImagePullPolicy: v1.PullNever, Command: []string{"true"}})
	done.RestartPolicy = v1.RestartPolicyNever
	createPod(t, c, ns, "done", done)
	waitPodPhase(t, c, ns, "keep", v1.PodRunning, startupWait)
	waitPodPhase(t, c, ns, "done", v1.PodSucceeded, startupWait)
	before := a.running("keep")

	ctx := context.Background()
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	var regressions []string
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			if (p.Name == "done" && p.Status.Phase != v1.PodSucceeded) || (p.Name == "keep" && p.Status.Phase != v1.PodRunning) {
				mu.Lock()
				regressions = append(regressions, fmt.Sprintf("%s %s", p.Name, p.Status.Phase))
				mu.Unlock()
			}
		}
	}()
	a.stop(syscall.SIGKILL)
	a.start()
	a.waitAPI()
	a.waitRounds(3)
	after := a.running("keep")
	for name, ctr := range before {
		if after[name].ID != ctr.ID {
			t.Errorf("container %s recreated after the restart: %s → %s", name, ctr.ID, after[name].ID)
		}
	}
	if err := c.CoreV1().Nodes().Delete(ctx, a.node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(t, c, a.node, 40*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(regressions) > 0 {
		t.Errorf("statuses written back after the restart: %v", regressions)
	}
}

// A kubeconfig the API server refuses is reported naming the server and
// the reason; static pods run regardless.
func TestNodeWrongCredentials(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	kc := untrustedKubeconfig(t, cl)
	a := startAgent(t, "--kubeconfig", kc, "--node-ip", cl.Address)
	a.writeManifest("static.yaml", lifecyclePod("static", "Always", `  containers:
  - name: app
    image: `+testImage+`
    command: ["sleep", "100000"]
`))
	a.waitRunning("static", "app")
	waitFor(t, 20*time.Second, func() (bool, string) {
		log := a.log()
		return strings.Contains(log, "register with "+cl.Server) && strings.Contains(log, "Unauthorized"), tail(log, 5)
	})
}

// 100 pods bound at once all run, with the agent's request rate to the API
// server within its QPS. Not parallel: it times the agent, and its 100
// containers would weigh on every agent started beside it.
func TestNodeHundredPodsAtOnce(t *testing.T) {
	cl := sharedCluster(t)
	a := startNode(t, "--kube-api-qps", "20", "--kube-api-burst", "40")
	c, ns := readyNode(t, cl, a)
	before := a.metric("rest_client_requests_total", nil)
	start := time.Now()
	for i := 0; i < 100; i++ {
		createPod(t, c, ns, fmt.Sprintf("p%03d", i), onNode(a.node, sleepy("app")))
	}
	waitPodsRunning(t, c, ns, 100, true, 180*time.Second)
	took := time.Since(start)
	reqs := a.metric("rest_client_requests_total", nil) - before
	t.Logf("100 pods Running in %v; the agent sent %.0f requests (%.1f/s)", took.Round(time.Second), reqs, reqs/took.Seconds())
	// client-go's token bucket: the burst at once, then qps a second. A
	// rate over the whole window would wrongly fail a fast run (the burst
	// weighs more in a short one).
	if limit := 40 + 20*took.Seconds(); reqs > limit*1.05 {
		t.Errorf("%.0f requests in %v, over --kube-api-burst 40 plus --kube-api-qps 20 a second (%.0f)", reqs, took.Round(time.Second), limit)
	}
}

// kubectlStdin runs kubectl as the admin with input on its stdin.
func kubectlStdin(c *cluster.Cluster, stdin string, args ...string) (string, error) {
	cmd := exec.Command(c.KubectlPath(), append([]string{"--kubeconfig", c.AdminKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// background is a kubectl left running (port-forward), killed by stop.
type background struct{ cmd *exec.Cmd }

func (b *background) stop() { _ = b.cmd.Process.Kill(); _ = b.cmd.Wait() }

func kubectlStart(c *cluster.Cluster, args ...string) (*background, error) {
	cmd := exec.Command(c.KubectlPath(), append([]string{"--kubeconfig", c.AdminKubeconfig}, args...)...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &background{cmd}, nil
}

// untrustedKubeconfig names the cluster's API server with a token it never
// issued.
func untrustedKubeconfig(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthority: c.CAFile}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "not-a-token-of-this-cluster"}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// privateCluster starts a control plane of the test's own, for a test that
// takes its API server away.
func privateCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	sharedCluster(t) // skips (or fails under CI) as the shared one would
	bin, err := cluster.BinDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/dev/shm", "classic-kubelet-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, dir, cluster.Options{BinDir: bin})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(); os.RemoveAll(dir) })
	return c
}

// nodeOf starts an agent as a node of c (startNode's flags, for a cluster
// that is not the shared one).
func nodeOf(t *testing.T, c *cluster.Cluster, extraArgs ...string) *agent {
	t.Helper()
	return startAgentWith(t, func(a *agent) {
		creds, err := c.NodeCredentials(a.node, c.Address)
		if err != nil {
			t.Fatal(err)
		}
		a.port = freePortOn(t, c.Address)
		a.extraArgs = append([]string{"--kubeconfig", creds.Kubeconfig, "--node-ip", c.Address, "--address", c.Address,
			"--tls-cert-file", creds.CertFile, "--tls-private-key-file", creds.KeyFile, "--client-ca-file", creds.ClientCAFile,
			"--authentication-token-webhook", "--authorization-mode=Webhook",
		}, a.extraArgs...)
	}, extraArgs...)
}

// The API server stopped for 60 s with 8 pods running: nothing stops,
// the agent keeps its pods (a container that dies meanwhile is restarted),
// and once the API server is back the statuses catch up within 10 s; the
// node is never NotReady for longer than the outage.
func TestNodeSurvivesAPIServerOutage(t *testing.T) {
	t.Parallel()
	cl := privateCluster(t)
	a := nodeOf(t, cl)
	c, ns := readyNode(t, cl, a)
	ctx := context.Background()
	const pods = 8
	for i := 0; i < pods; i++ {
		createPod(t, c, ns, fmt.Sprintf("p%02d", i), onNode(a.node, sleepy("app")))
	}
	waitPodsRunning(t, c, ns, pods, false, 3*time.Minute)
	before := map[string]string{}
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("p%02d", i)
		before[name] = a.running(name)["app"].ID
	}
	// Watch the Node's Ready condition from the outside through the
	// outage (the watch itself pauses with the API server).
	if err := cl.Signal("kube-apiserver", syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = cl.Signal("kube-apiserver", syscall.SIGCONT)
		}
	}()
	// A container killed during the outage is restarted by the agent
	// alone; its new restart count must reach the API server afterwards.
	if err := dockerc.KillContainer(docker.KillContainerOptions{ID: before["p00"]}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(stopped.Add(60 * time.Second)))
	for name, id := range before {
		if name == "p00" {
			continue
		}
		if got := a.running(name)["app"].ID; got != id {
			t.Errorf("pod %s: container %s replaced by %q during the outage", name, id, got)
		}
	}
	if r := a.running("p00"); r["app"].ID == "" || r["app"].ID == before["p00"] {
		t.Errorf("the container killed during the outage was not restarted: %v", keys(r))
	}
	if err := cl.Signal("kube-apiserver", syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	back := time.Now()
	waitFor(t, 30*time.Second, func() (bool, string) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "p00", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		rc := int32(0)
		if len(p.Status.ContainerStatuses) == 1 {
			rc = p.Status.ContainerStatuses[0].RestartCount
		}
		return rc >= 1 && p.Status.Phase == v1.PodRunning, fmt.Sprintf("p00 phase %s restarts %d", p.Status.Phase, rc)
	})
	caught := time.Since(back)
	t.Logf("status caught up %v after the API server's return", caught.Round(100*time.Millisecond))
	if caught > 10*time.Second {
		t.Errorf("status caught up %v after the API server's return, want within 10 s", caught)
	}
	// Ready again (the node lifecycle controller may have seen a stale
	// Lease for a moment) well within the outage's length.
	waitNodeReady(t, c, a.node, 60*time.Second)
	if took := time.Since(back); took > 60*time.Second {
		t.Errorf("node Ready %v after the outage ended", took)
	}
}

// The API server restarted (its watches closed, 10 s down): the agent's pod
// source lists again and watches anew without stopping anything, so a pod
// created after the restart runs and one deleted after it stops, while the
// pods it had keep their containers.
func TestNodeRelistsAfterAPIServerRestart(t *testing.T) {
	t.Parallel()
	cl := privateCluster(t)
	a := nodeOf(t, cl)
	c, ns := readyNode(t, cl, a)
	ctx := context.Background()
	for _, name := range []string{"kept", "deleted"} {
		createPod(t, c, ns, name, onNode(a.node, sleepy("app")))
		waitPodPhase(t, c, ns, name, v1.PodRunning, startupWait)
	}
	kept := a.running("kept")["app"].ID
	if err := cl.RestartAPIServer(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	createPod(t, c, ns, "created", onNode(a.node, sleepy("app")))
	if err := c.CoreV1().Pods(ns).Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, c, ns, "created", v1.PodRunning, startupWait)
	waitFor(t, 60*time.Second, func() (bool, string) {
		_, err := c.CoreV1().Pods(ns).Get(ctx, "deleted", metav1.GetOptions{})
		left := len(a.running("deleted"))
		return apierrors.IsNotFound(err) && left == 0, fmt.Sprintf("deleted pod: get %v, %d containers running", err, left)
	})
	if got := a.running("kept")["app"].ID; got != kept {
		t.Errorf("pod kept: container %s replaced by %q across the API server's restart", kept, got)
	}
}

// With the API server unreachable at start, static pods run at once and
// the node registers (registration retried with back-off) once it answers.
func TestNodeAPIServerUnreachableAtStart(t *testing.T) {
	t.Parallel()
	cl := privateCluster(t)
	if err := cl.Signal("kube-apiserver", syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = cl.Signal("kube-apiserver", syscall.SIGCONT)
		}
	}()
	a := nodeOf(t, cl)
	a.writeManifest("static.yaml", lifecyclePod("static", "Always", `  containers:
  - name: app
    image: `+testImage+`
    command: ["sleep", "100000"]
`))
	a.waitRunning("static", "app")
	time.Sleep(10 * time.Second)
	if err := cl.Signal("kube-apiserver", syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	back := time.Now()
	waitNodeReady(t, cl.Admin(), a.node, 60*time.Second)
	t.Logf("node Ready %v after the API server answered", time.Since(back).Round(100*time.Millisecond))
}

// An API pod's volumes and variables from the API server: the
// ServiceAccount admission's kube-api-access volume (a token the API
// server's TokenReview accepts, bound to the pod; the root CA; the
// namespace), a config map volume that follows an edit, and variables from
// a secret and a config map.
func TestNodePodVolumesFromAPI(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	ctx := context.Background()
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"},
		Data: map[string]string{"a": "one", "b": "bee"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"},
		Data: map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctr := sleepy("app")
	ctr.Env = []v1.EnvVar{{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "password"}}}}
	ctr.EnvFrom = []v1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}}}
	ctr.VolumeMounts = []v1.VolumeMount{{Name: "conf", MountPath: "/conf"}}
	spec := onNode(a.node, ctr)
	spec.Volumes = []v1.Volume{{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}}}}
	createPod(t, c, ns, "vols", spec)
	waitPodPhase(t, c, ns, "vols", v1.PodRunning, startupWait)

	sa := "/var/run/secrets/kubernetes.io/serviceaccount/"
	token, err := cl.Kubectl("-n", ns, "exec", "vols", "--", "cat", sa+"token")
	if err != nil {
		t.Fatalf("read the token: %v %s", err, token)
	}
	review, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: strings.TrimSpace(token)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:"+ns+":default" ||
		!slices.Contains(review.Status.User.Extra["authentication.kubernetes.io/pod-name"], "vols") {
		t.Errorf("TokenReview of the pod's token: %+v", review.Status)
	}
	for file, want := range map[string]string{sa + "namespace": ns, "/conf/a": "one", "/conf/b": "bee"} {
		if out, err := cl.Kubectl("-n", ns, "exec", "vols", "--", "cat", file); err != nil || out != want {
			t.Errorf("%s: %q %v, want %q", file, out, err, want)
		}
	}
	if out, err := cl.Kubectl("-n", ns, "exec", "vols", "--", "cat", sa+"ca.crt"); err != nil || !strings.Contains(out, "BEGIN CERTIFICATE") {
		t.Errorf("ca.crt: %v %.60q", err, out)
	}
	if out, err := cl.Kubectl("-n", ns, "exec", "vols", "--", "env"); err != nil ||
		!strings.Contains(out, "PASSWORD=s3cret\n") || !strings.Contains(out, "CM_a=one\n") || !strings.Contains(out, "CM_b=bee\n") {
		t.Errorf("env: %v %q", err, out)
	}
	if out, err := cl.Kubectl("-n", ns, "exec", "vols", "--", "touch", "/conf/x"); err == nil {
		t.Errorf("the config map volume is writable: %q", out)
	}
	// An edit reaches the running pod's volume within the object cache's
	// minute and a resync.
	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "conf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"a": "two"}
	if _, err := c.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	edited := time.Now()
	// The edit takes up to a minute (the kubelet's sync and cache):
	// looked for every 3 s, each look two execs.
	waitEvery(t, 90*time.Second, 3*time.Second, func() (bool, string) {
		a, _ := cl.Kubectl("-n", ns, "exec", "vols", "--", "cat", "/conf/a")
		_, errB := cl.Kubectl("-n", ns, "exec", "vols", "--", "cat", "/conf/b")
		return a == "two" && errB != nil, fmt.Sprintf("/conf/a %q, /conf/b gone: %v", a, errB != nil)
	})
	t.Logf("the edit reached the pod's volume in %v", time.Since(edited).Round(time.Second))
}

// The agent itself refuses a user the API server's RBAC gives no right on
// nodes/proxy (403, by SubjectAccessReview), by client certificate or by
// bearer token (TokenReview), and lets through one it gives the right to;
// a request without credentials is 401.
func TestNodeAuthorizesDirectRequests(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	c := cl.Admin()
	a := startNode(t)
	waitNodeReady(t, c, a.node, startupWait)
	ctx := context.Background()
	base := fmt.Sprintf("https://%s:%d", cl.Address, a.port)
	get := func(kubeconfig, token, path string) int {
		t.Helper()
		cfg := &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: cl.CAFile}}
		if kubeconfig != "" {
			var err error
			if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
				t.Fatal(err)
			}
		}
		cfg.BearerToken = token
		tr, err := rest.TransportFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	nobody, err := cl.UserKubeconfig("e2e-nobody")
	if err != nil {
		t.Fatal(err)
	}
	if code := get(nobody, "", "/pods"); code != http.StatusForbidden {
		t.Errorf("a user without rights, by certificate: GET /pods = %d, want 403", code)
	}
	if code := get("", "", "/pods"); code != http.StatusUnauthorized {
		t.Errorf("no credentials: GET /pods = %d, want 401", code)
	}
	if code := get(cl.AdminKubeconfig, "", "/pods"); code != http.StatusOK {
		t.Errorf("admin (system:masters): GET /pods = %d, want 200", code)
	}
	// A service account's token: refused, then allowed once RBAC grants
	// it nodes/proxy (the refusal is cached 30 s: a second account).
	ns := testNamespace(t, cl)
	for _, name := range []string{"plain", "reader"} {
		if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	token := func(sa string) string {
		tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	if code := get("", token("plain"), "/pods"); code != http.StatusForbidden {
		t.Errorf("a service account without rights, by token: GET /pods = %d, want 403", code)
	}
	if code := get("", "not-a-token", "/pods"); code != http.StatusUnauthorized {
		t.Errorf("a bad token: GET /pods = %d, want 401", code)
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-stats"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/stats"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RbacV1().ClusterRoles().Delete(ctx, ns+"-stats", metav1.DeleteOptions{}) })
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-stats"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: ns + "-stats"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RbacV1().ClusterRoleBindings().Delete(ctx, ns+"-stats", metav1.DeleteOptions{}) })
	reader := token("reader")
	// Authorized is any answer but 401 and 403: on a loaded machine the
	// stats may still be unavailable (503, cAdvisor starting) when RBAC
	// already lets the account through.
	waitFor(t, 60*time.Second, func() (bool, string) {
		code := get("", reader, "/stats/summary")
		return code != http.StatusUnauthorized && code != http.StatusForbidden, fmt.Sprintf("GET /stats/summary with nodes/stats: %d", code)
	})
	if code := get("", reader, "/pods"); code != http.StatusForbidden {
		t.Errorf("nodes/stats only: GET /pods = %d, want 403", code)
	}
}

// A static pod gets a mirror pod in the API server, owned by the Node and
// showing the pod's status; a mirror deleted with kubectl is made again; a
// changed static pod's mirror is replaced; a removed one's deleted. A
// static pod naming a secret gets none, and an event says why.
func TestNodeMirrorPods(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	c := cl.Admin()
	a := startNode(t)
	n := waitNodeReady(t, c, a.node, startupWait)
	ns := testNamespace(t, cl)
	ctx := context.Background()
	static := func(image string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: static, namespace: %s, labels: {app: static}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - {name: app, image: %s, command: ["sleep", "100000"], imagePullPolicy: Never, env: [{name: V, value: %q}]}
`, ns, testImage, image)
	}
	a.writeManifest("static.yaml", static("1"))
	mirror := func(timeout time.Duration, ok func(*v1.Pod) bool) *v1.Pod {
		t.Helper()
		var p *v1.Pod
		waitFor(t, timeout, func() (bool, string) {
			var err error
			p, err = c.CoreV1().Pods(ns).Get(ctx, "static", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return ok(p), fmt.Sprintf("mirror %s phase %s ip %q annotations %v", p.UID, p.Status.Phase, p.Status.PodIP, p.Annotations)
		})
		return p
	}
	first := mirror(30*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && p.Status.PodIP != "" })
	if first.Annotations["kubernetes.io/config.mirror"] == "" || first.Annotations["kubernetes.io/config.source"] != "file" {
		t.Errorf("mirror annotations %v", first.Annotations)
	}
	if len(first.OwnerReferences) != 1 || first.OwnerReferences[0].Kind != "Node" || first.OwnerReferences[0].UID != n.UID {
		t.Errorf("mirror owners %+v, want the Node %s", first.OwnerReferences, n.UID)
	}
	container := a.running("static")["app"].ID
	if _, err := cl.Kubectl("-n", ns, "delete", "pod", "static", "--wait=false"); err != nil {
		t.Fatal(err)
	}
	second := mirror(30*time.Second, func(p *v1.Pod) bool {
		return p.UID != first.UID && p.DeletionTimestamp == nil && p.Status.Phase == v1.PodRunning
	})
	if got := a.running("static")["app"].ID; got != container {
		t.Errorf("deleting the mirror restarted the static pod: %s → %s", container, got)
	}
	a.writeManifest("static.yaml", static("2"))
	mirror(30*time.Second, func(p *v1.Pod) bool {
		return p.UID != second.UID && p.Annotations["kubernetes.io/config.mirror"] != second.Annotations["kubernetes.io/config.mirror"] &&
			p.Status.Phase == v1.PodRunning
	})
	a.removeManifest("static.yaml")
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, err := c.CoreV1().Pods(ns).Get(ctx, "static", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("mirror after the manifest's removal: %v", err)
	})
	a.writeManifest("secret.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: with-secret, namespace: %s}
spec:
  containers:
  - {name: app, image: %s, command: ["sleep", "100000"], env: [{name: S, valueFrom: {secretKeyRef: {name: s, key: k}}}]}
`, ns, testImage))
	waitFor(t, 20*time.Second, func() (bool, string) {
		e, ok := a.findEvent("with-secret", "FailedMirrorPod")
		return ok && strings.Contains(e.Message, "NodeRestriction"), fmt.Sprintf("event %+v", e)
	})
	if _, err := c.CoreV1().Pods(ns).Get(ctx, "with-secret", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a static pod naming a secret got a mirror: %v", err)
	}
}

// A node with 20 idle API pods (each with its token volume and the root CA
// config map) costs the API server what the kubelet's budget allows: a
// Lease renewal every 10 s, one read of the shared config map a minute (it
// was one per pod: their resyncs all missed the expired cache at once), no
// status writes: counted by the shared API server's audit log.
func TestNodeIdleCostsTheAPIServerLittle(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	for i := 0; i < 20; i++ {
		createPod(t, c, ns, fmt.Sprintf("p%02d", i), onNode(a.node, sleepy("app")))
	}
	waitPodsRunning(t, c, ns, 20, true, 3*time.Minute)
	a.waitRounds(12) // the start's writes are done, every pod resynced
	start := time.Now()
	// Past a minute: the config map's cache expires once inside it, when
	// every pod's resync would ask for it at once without the coalescing.
	time.Sleep(61 * time.Second)
	counts := auditedRequests(t, "system:node:"+a.node, start, time.Now())
	total := 0
	for _, n := range counts {
		total += n
	}
	t.Logf("%d requests of the node in 61 s idle: %v", total, counts)
	if total > 9 {
		t.Errorf("%d requests in 61 s with 20 idle pods, want at most 9 (7 Lease renewals, two config map reads): %v", total, counts)
	}
}

// auditedRequests counts a user's requests that the shared API server
// completed between start and end, by verb and URI, from its audit log.
func auditedRequests(t *testing.T, user string, start, end time.Time) map[string]int {
	t.Helper()
	f, err := os.Open(shared.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			Verb, RequestURI, Stage string
			User                    struct{ Username string }
			StageTimestamp          time.Time
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" || ev.User.Username != user ||
			ev.StageTimestamp.Before(start) || ev.StageTimestamp.After(end) {
			continue
		}
		counts[ev.Verb+" "+ev.RequestURI]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return counts
}

// A pod's imagePullSecrets are read from the API server and their
// credential pulls its image from a registry that wants one (Debian's
// docker-registry behind htpasswd, on loopback; the node has no
// credentials of its own); without the secret the pull is refused. A
// secret that cannot be read is the kubelet's FailedToRetrieveImagePullSecret
// warning, and the pull goes on with the secrets that could be read.
func TestNodeImagePullSecrets(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	c := cl.Admin()
	reg := startRegistry(t, true)
	img := reg.push("pullsecret")
	noCreds := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(noCreds, []byte(`{"auths": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startNode(t, "--docker-config", noCreds)
	waitNodeReady(t, c, a.node, startupWait)
	ns := testNamespace(t, cl)
	ctx := context.Background()
	auth := base64.StdEncoding.EncodeToString([]byte(reg.user + ":" + reg.pass))
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred"},
		Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths": {"` + reg.addr + `": {"auth": "` + auth + `"}}}`)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := func(secrets ...string) v1.PodSpec {
		ctr := sleepy("app")
		ctr.Image, ctr.ImagePullPolicy = img, v1.PullAlways // pulled even once present
		s := onNode(a.node, ctr)
		for _, name := range secrets {
			s.ImagePullSecrets = append(s.ImagePullSecrets, v1.LocalObjectReference{Name: name})
		}
		return s
	}
	createPod(t, c, ns, "with-secret", spec("regcred"))
	createPod(t, c, ns, "without", spec())
	createPod(t, c, ns, "partly-absent", spec("absent", "regcred"))
	createPod(t, c, ns, "absent", spec("absent"))
	waitPodPhase(t, c, ns, "with-secret", v1.PodRunning, startupWait)
	waitPodPhase(t, c, ns, "partly-absent", v1.PodRunning, startupWait)
	for _, name := range []string{"without", "absent"} {
		waitFor(t, 60*time.Second, func() (bool, string) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
				return false, fmt.Sprintf("pod %s: phase %s, container statuses %+v", name, p.Status.Phase, p.Status.ContainerStatuses)
			}
			w := p.Status.ContainerStatuses[0].State.Waiting
			return (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && strings.Contains(w.Message, "no credentials for registry "+reg.addr),
				fmt.Sprintf("pod %s: waiting %s: %s", name, w.Reason, w.Message)
		})
	}
	// The unreadable secret is warned of, once per pod, on the pods that
	// name it alone.
	want := "Unable to retrieve some image pull secrets (absent); attempting to pull the image may not succeed."
	waitFor(t, 30*time.Second, func() (bool, string) {
		list, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedToRetrieveImagePullSecret"})
		if err != nil {
			return false, err.Error()
		}
		warned := map[string]string{}
		for _, e := range list.Items {
			warned[e.InvolvedObject.Name] += fmt.Sprintf("%s x%d; ", e.Message, e.Count)
		}
		ok := len(warned) == 2 && warned["absent"] == want+" x1; " && warned["partly-absent"] == want+" x1; "
		return ok, fmt.Sprintf("FailedToRetrieveImagePullSecret events: %v", warned)
	})
}
