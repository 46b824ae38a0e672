package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/test/cluster"
)

// shared is the control plane of one `go test` run: started by the first
// test that asks for it, stopped by TestMain after every test.
var shared struct {
	once sync.Once
	c    *cluster.Cluster
	dir  string
	skip string // why there is none, when the binaries are not built
	err  error  // why it failed to start
	// auditLog is the API server's audit log of the nodes' requests.
	auditLog string
}

// auditPolicy logs the metadata of every request of a node.
const auditPolicy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n" +
	"- level: Metadata\n  userGroups: [\"system:nodes\"]\n- level: None\n"

// sharedCluster returns the run's control plane, starting it on first use.
// Without the control plane's binaries the test is skipped, and fails under
// CI=true (hack/ensure-control-plane.sh builds them).
func sharedCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	shared.once.Do(startSharedCluster)
	if shared.skip != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the control plane is required under CI=true: %s", shared.skip)
		}
		t.Skipf("SKIPPING node-mode test: %s", shared.skip)
	}
	if shared.err != nil {
		t.Fatalf("start control plane: %v", shared.err)
	}
	return shared.c
}

func startSharedCluster() {
	root, err := filepath.Abs("../..")
	if err != nil {
		shared.err = err
		return
	}
	bin, err := cluster.BinDir(root)
	if err != nil {
		shared.skip = err.Error()
		return
	}
	// tmpfs: etcd's fsyncs cost nothing there.
	if shared.dir, err = os.MkdirTemp("/dev/shm", "classic-kubelet-cluster-"); err != nil {
		shared.err = err
		return
	}
	// The nodes' requests are audited (metadata only) for the tests that
	// count what a node costs the API server (auditedRequests).
	policy := filepath.Join(shared.dir, "audit-policy.yaml")
	if shared.err = os.WriteFile(policy, []byte(auditPolicy), 0o644); shared.err != nil {
		return
	}
	shared.auditLog = filepath.Join(shared.dir, "audit.log")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	shared.c, shared.err = cluster.Start(ctx, shared.dir, cluster.Options{BinDir: bin,
		APIServerArgs: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + shared.auditLog}})
	fmt.Fprintf(os.Stderr, "e2e: control plane started in %v (%s)\n", time.Since(began).Round(100*time.Millisecond), shared.dir)
}

// stopSharedCluster stops the run's control plane, if one was started,
// and removes its files.
func stopSharedCluster() {
	if shared.c != nil {
		shared.c.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

// startNode starts an agent as a node of the shared control plane: node
// credentials (system:node:<name>), node IP docker0's address, its
// full-access port there with the cluster's serving certificate, client
// certificates of the cluster CA and webhook authentication and
// authorization, as the API server expects of a kubelet. Cleanup stops
// the agent, then deletes its Node. extraArgs come last (a later flag wins).
func startNode(t *testing.T, extraArgs ...string) *agent {
	t.Helper()
	c := sharedCluster(t)
	var node string
	t.Cleanup(func() { // runs after startAgentWith's cleanup has stopped the agent
		if node == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Admin().CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete node %s: %v", node, err)
		}
	})
	return startAgentWith(t, func(a *agent) {
		node = a.node
		creds, err := c.NodeCredentials(a.node, c.Address)
		if err != nil {
			t.Fatal(err)
		}
		a.port = freePortOn(t, c.Address)
		a.extraArgs = append([]string{
			"--kubeconfig", creds.Kubeconfig,
			"--node-ip", c.Address,
			"--address", c.Address,
			"--tls-cert-file", creds.CertFile, "--tls-private-key-file", creds.KeyFile,
			"--client-ca-file", creds.ClientCAFile,
			"--authentication-token-webhook", "--authorization-mode=Webhook",
		}, a.extraArgs...)
	}, extraArgs...)
}

// freePortOn is freePort for a port that is free on addr too.
func freePortOn(t *testing.T, addr string) int {
	t.Helper()
	for {
		port := freePort(t)
		l, err := net.Listen("tcp", net.JoinHostPort(addr, fmt.Sprint(port)))
		if err == nil {
			l.Close()
			return port
		}
	}
}

// testNamespace creates a namespace of the test's own, deleted at cleanup.
func testNamespace(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	base := strings.Trim(nameUnsafe.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = base[:40]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: base + "-" + hex.EncodeToString(b[:])}}
	if _, err := c.Admin().CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Admin().CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	// The controller-manager makes the namespace's default ServiceAccount,
	// without which the ServiceAccount admission refuses pods, and its
	// kube-root-ca.crt, which every pod's token volume names.
	waitFor(t, 30*time.Second, func() (bool, string) {
		if _, err := c.Admin().CoreV1().ServiceAccounts(ns.Name).Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
			return false, fmt.Sprintf("namespace %s: service account default: %v", ns.Name, err)
		}
		_, err := c.Admin().CoreV1().ConfigMaps(ns.Name).Get(context.Background(), "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, fmt.Sprintf("namespace %s: config map kube-root-ca.crt: %v", ns.Name, err)
	})
	return ns.Name
}

// TestControlPlaneUp checks the control plane the node-mode tests run
// against, without an agent: the API server is ready, the controllers and
// the scheduler act on a Deployment (whose pod stays Pending: it fits no
// node), the ServiceAccount admission and the root CA publisher work, and
// node credentials have a node's rights and no more.
func TestControlPlaneUp(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	if out, err := c.Kubectl("get", "--raw", "/readyz"); err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("kubectl get --raw /readyz: %q, %v", out, err)
	}
	ns := testNamespace(t, c)

	// Deployment → ReplicaSet → Pod (controller-manager), then the
	// scheduler's verdict. The selector names no node: other tests' nodes
	// may be up in this run.
	labels := map[string]string{"app": "pending"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pending"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubernetes.io/hostname": "no-such-node"},
					Containers:   []corev1.Container{{Name: "server", Image: testImage}},
				},
			},
		},
	}
	if _, err := c.Admin().AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	var pod corev1.Pod
	waitFor(t, 30*time.Second, func() (bool, string) {
		pods, err := c.Admin().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 1 {
			return false, fmt.Sprintf("pods: %v (err %v)", len(pods.Items), err)
		}
		pod = pods.Items[0]
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return true, ""
			}
		}
		return false, fmt.Sprintf("pod %s: conditions %+v", pod.Name, pod.Status.Conditions)
	})
	if pod.Status.Phase != corev1.PodPending || pod.Spec.NodeName != "" {
		t.Errorf("pod %s: phase %s on node %q, want Pending on none", pod.Name, pod.Status.Phase, pod.Spec.NodeName)
	}
	// The ServiceAccount admission plug-in gave it the projected token
	// volume a node must write (testNamespace waited for the root CA it
	// names).
	var projected bool
	for _, v := range pod.Spec.Volumes {
		projected = projected || strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil
	}
	if !projected {
		t.Errorf("pod %s: no kube-api-access-* projected volume: %+v", pod.Name, pod.Spec.Volumes)
	}

	// A node's credentials: the Node authorizer lets it read its own Node
	// (absent: 404), and lets it read no secret it has no pod for.
	var b [3]byte
	_, _ = rand.Read(b[:])
	node := "e2e-cpup-" + hex.EncodeToString(b[:])
	creds, err := c.NodeCredentials(node, c.Address)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := c.Client(creds.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s GET its own absent Node: %v, want NotFound", node, err)
	}
	if _, err := nc.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node %s list secrets: %v, want Forbidden", node, err)
	}
	if out, err := c.KubectlAs(creds.Kubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"); err != nil ||
		!strings.HasPrefix(out, "system:node:"+node+" ") || !strings.Contains(out, "system:nodes") {
		t.Errorf("node kubeconfig whoami: %q, %v", out, err)
	}

	// A user of no group has no rights on pods nor on nodes/proxy (the
	// API server refuses before it looks the node up).
	nobody, err := c.UserKubeconfig("e2e-nobody")
	if err != nil {
		t.Fatal(err)
	}
	nbc, err := c.Client(nobody)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nbc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("user e2e-nobody list pods: %v, want Forbidden", err)
	}
	if err := nbc.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "healthz").Do(ctx).Error(); !apierrors.IsForbidden(err) {
		t.Errorf("user e2e-nobody GET nodes/%s/proxy/healthz: %v, want Forbidden", node, err)
	}
	// The API server's own client certificate to kubelets may do what a
	// kubelet's webhook authorizer asks of it.
	for _, sub := range []string{"nodes/proxy", "nodes/stats", "nodes/log", "nodes/metrics"} {
		if out, err := c.Kubectl("auth", "can-i", "get", sub, "--as", "kube-apiserver-kubelet-client"); err != nil || strings.TrimSpace(out) != "yes" {
			t.Errorf("kube-apiserver-kubelet-client get %s: %q, %v", sub, out, err)
		}
	}
}
