package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/classic-kubelet/kubelet/test/cluster"
)

// auditPolicy records every request of a node (group system:nodes) at
// the Metadata level, and nothing else: the API server's own count of what
// the agent asks of it.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
`

// nodeMode measures the agent as a node of the real control plane: a
// Deployment scaled 0 → NodePods on one node, creation → Running as the
// API server shows it, against the same pods dropped in its manifest
// directory in the same run; and the agent's API requests per pod started
// and per minute with NodeIdle pods idle, counted by the API server (its
// audit log, user system:node:<name>).
func (h *Harness) nodeMode() []Result {
	fail := func(err error) []Result {
		return []Result{{Scenario: "node mode", Note: err.Error()}}
	}
	bin, err := cluster.BinDir("../..")
	if err != nil {
		return fail(err)
	}
	dir := filepath.Join(h.dir, "cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	auditLog := filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return fail(err)
	}
	ctx := context.Background()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	c, err := cluster.Start(sctx, dir, cluster.Options{BinDir: bin, APIServerArgs: []string{
		"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-mode=blocking"}})
	cancel()
	if err != nil {
		return fail(err)
	}
	defer c.Stop()
	name := "bench-" + h.run + "-node"
	creds, err := c.NodeCredentials(name, c.Address)
	if err != nil {
		return fail(err)
	}
	a, err := h.startAgent("node", agentOptions{flags: []string{"--hostname-override", name,
		"--kubeconfig", creds.Kubeconfig, "--node-ip", c.Address, "--address", c.Address, "--port", fmt.Sprint(freePort()),
		"--tls-cert-file", creds.CertFile, "--tls-private-key-file", creds.KeyFile, "--client-ca-file", creds.ClientCAFile}})
	if err != nil {
		return fail(err)
	}
	defer h.stopAgent(a)
	client := c.Admin()
	if err := waitReady(ctx, client, a.node, time.Minute); err != nil {
		return fail(err)
	}
	ns := "bench-" + h.run
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fail(err)
	}
	user := "system:node:" + a.node

	var api, files, sched []float64
	var perPod []float64
	for round := 0; round < h.cfg.Rounds; round++ {
		// The manifest directory: the same pods, Docker's start event.
		names := make([]string, h.cfg.NodePods)
		for i := range names {
			names[i] = fmt.Sprintf("f%d-%02d", round, i)
		}
		w, err := h.watchStarts(a.node, 2)
		if err != nil {
			return fail(err)
		}
		at := a.drop(names, podManifest, 0)
		done := w.waitFor(names, 2*time.Minute)
		w.close()
		for i, n := range names {
			if t, ok := done[n]; ok {
				files = append(files, ms(t.Sub(at[i])))
			}
		}
		h.clear(a)

		// The Deployment, scaled 0 → NodePods.
		before := auditCount(auditLog, user)
		lat, sch, err := scaleDeployment(ctx, client, ns, fmt.Sprintf("web%d", round), a.node, int32(h.cfg.NodePods))
		if err != nil {
			return fail(err)
		}
		api, sched = append(api, lat...), append(sched, sch...)
		perPod = append(perPod, float64(auditCount(auditLog, user)-before)/float64(h.cfg.NodePods))
		if err := scaleTo(ctx, client, ns, fmt.Sprintf("web%d", round), 0, a.node); err != nil {
			return fail(err)
		}
	}
	ratio := median(api) / median(files)
	burst := Result{
		Scenario: fmt.Sprintf("node mode: Deployment 0→%d on one node", h.cfg.NodePods),
		Values: map[string]float64{
			"api p50 ms": median(api), "api p99 ms": percentile(api, 99),
			"file p50 ms": median(files), "file p99 ms": percentile(files, 99),
			"scheduler p50 ms": median(sched), "ratio": ratio, "requests/pod": median(perPod),
		},
		Target: "median creation → Running (API) ≤ 1.15 × the manifest directory's",
		Met:    ratio <= 1.15,
		Remark: "api: from the pod's creation (watch) to Running in the API server (watch); file: rename into the directory to Docker's start of its app container; scheduler: creation to bound; requests/pod: the API server's audit log, user system:node:<name>, during the scale-up",
	}
	// Idle: NodeIdle pods, requests per minute.
	if err := scaleTo(ctx, client, ns, "idle", int32(h.cfg.NodeIdle), a.node); err != nil {
		return append([]Result{burst}, Result{Scenario: "node mode: idle", Note: err.Error()})
	}
	// Let the start-up writes end (a smoke run, which asserts no figure,
	// waits only SettleFor).
	quiet := 15 * time.Second
	if h.cfg.SettleFor > 0 {
		quiet = min(quiet, h.cfg.SettleFor)
	}
	time.Sleep(quiet)
	before := auditCount(auditLog, user)
	time.Sleep(h.cfg.IdleWindow)
	perMin := float64(auditCount(auditLog, user)-before) / h.cfg.IdleWindow.Minutes()
	idle := Result{
		Scenario: fmt.Sprintf("node mode: %d idle pods", h.cfg.NodeIdle),
		Values:   map[string]float64{"requests/min": perMin},
		Target:   "≤ 8 requests/min (the kubelet's budget: a lease renewal every 10 s, node status on change or every 5 min, pod status on change, and the re-watches of its informers every 5–10 min)",
		Met:      perMin <= 8,
		Remark:   "the API server's audit log, user system:node:<name>, over the idle window",
	}
	_ = scaleTo(ctx, client, ns, "idle", 0, a.node)
	return []Result{burst, idle}
}

func waitReady(ctx context.Context, c kubernetes.Interface, node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			for _, cond := range n.Status.Conditions {
				if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("node %s not Ready within %v", node, timeout)
}

func deployment(name, node string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
					TerminationGracePeriodSeconds: ptr.To(int64(2)),
					Containers: []v1.Container{{Name: "app", Image: testImage, ImagePullPolicy: v1.PullIfNotPresent,
						Args: []string{"/testserver"}}},
				},
			},
		},
	}
}

// scaleDeployment creates the Deployment at 0 replicas, scales it to n and
// times each pod from its creation (as a watch sees it) to being bound and
// to Running.
func scaleDeployment(ctx context.Context, c kubernetes.Interface, ns, name, node string, n int32) (running, bound []float64, err error) {
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, deployment(name, node, 0), metav1.CreateOptions{}); err != nil {
		return nil, nil, err
	}
	// An informer, not a bare watch: it lists again when the API server's
	// watch cache is behind (etcd 3.4 reports no progress).
	var mu sync.Mutex
	created, boundAt, runAt := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	see := func(o any) {
		p, ok := o.(*v1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, seen := created[p.Name]; !seen {
			created[p.Name] = now
		}
		if _, seen := boundAt[p.Name]; !seen && p.Spec.NodeName != "" {
			boundAt[p.Name] = now
		}
		if _, seen := runAt[p.Name]; !seen && p.Status.Phase == v1.PodRunning {
			runAt[p.Name] = now
		}
	}
	lw := cache.NewFilteredListWatchFromClient(c.CoreV1().RESTClient(), "pods", ns, func(o *metav1.ListOptions) {
		o.LabelSelector = "app=" + name
	})
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		return nil, nil, err
	}
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	go inf.RunWithContext(ictx)
	if !cache.WaitForCacheSync(ictx.Done(), inf.HasSynced) {
		return nil, nil, fmt.Errorf("pod informer did not sync")
	}
	if err := scaleTo(ctx, c, ns, name, n, ""); err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		mu.Lock()
		done := len(runAt)
		mu.Unlock()
		if done >= int(n) {
			break
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("%d of %d pods Running after 3 minutes", done, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for p, t := range runAt {
		running = append(running, ms(t.Sub(created[p])))
		bound = append(bound, ms(boundAt[p].Sub(created[p])))
	}
	sort.Float64s(running)
	return running, bound, nil
}

// scaleTo sets the Deployment's replicas (creating it if node is given and
// it is missing) and waits until exactly that many of its pods exist and
// run.
func scaleTo(ctx context.Context, c kubernetes.Interface, ns, name string, n int32, node string) error {
	// A merge patch of the scale subresource carries no resourceVersion: it
	// never conflicts with the Deployment controller's status updates (an
	// update of the scale read just before does).
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	_, err := c.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "scale")
	if apierrors.IsNotFound(err) && node != "" {
		_, err = c.AppsV1().Deployments(ns).Create(ctx, deployment(name, node, n), metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	if node == "" {
		return nil
	}
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err == nil {
			running := 0
			for _, p := range l.Items {
				if p.Status.Phase == v1.PodRunning {
					running++
				}
			}
			if len(l.Items) == int(n) && running == int(n) {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("deployment %s: not %d running pods within 5 minutes", name, n)
}

var auditMu sync.Mutex

// auditCount counts the audit log's requests of user (one line per
// request: the RequestReceived stage is omitted).
func auditCount(path, user string) int {
	auditMu.Lock()
	defer auditMu.Unlock()
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), user) {
			continue
		}
		var ev struct {
			Stage string `json:"stage"`
			User  struct {
				Username string `json:"username"`
			} `json:"user"`
		}
		if json.Unmarshal(line, &ev) == nil && ev.User.Username == user && ev.Stage == "ResponseComplete" {
			n++
		}
	}
	return n
}
