package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/classic-kubelet/kubelet/test/cluster"
)

// The two-node tests run one cluster as `make cluster NODES=2` runs it
// (cluster.StartMachines): a control plane that allocates podCIDRs, two
// nodes that are machines of their own on this host (network namespaces on
// a LAN bridge), their agents in CNI mode with --cluster-dns, kube-proxy in
// iptables mode on each machine, and CoreDNS as the kube-dns Service. Its
// subtests share it, so that its cost is paid once.

// Its ranges differ from `make cluster`'s defaults (10.244.0.0/16 and
// 10.250.0.0/24), so that one may run beside the tests.
const (
	twoNodeClusterCIDR = "10.251.0.0/16"
	twoNodeLAN         = "10.252.0.0/24"
)

// twoNodes is a running two-node cluster.
type twoNodes struct {
	c *cluster.Cluster
	m *cluster.Machines
	a *cluster.Node // node A
	b *cluster.Node // node B
}

// startTwoNodes starts the two-node cluster, or skips the test (fails
// under CI=true) when what it needs is not built: the control plane and
// kube-proxy (hack/ensure-control-plane.sh), the CNI plugins
// (hack/ensure-cni-plugins.sh), the CoreDNS image (hack/ensure-coredns.sh).
func startTwoNodes(t *testing.T) *twoNodes {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	need := func(err error) {
		if err == nil {
			return
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("required under CI=true: %v", err)
		}
		t.Skipf("SKIPPING two-node test: %v", err)
	}
	bin, err := cluster.BinDir(root)
	need(err)
	_, err = os.Stat(filepath.Join(bin, "kube-proxy"))
	need(err)
	cniBin, err := hackCheck(root, "ensure-cni-plugins.sh")
	need(err)
	dnsImage, err := hackCheck(root, "ensure-coredns.sh")
	need(err)

	dir, err := os.MkdirTemp("/dev/shm", "classic-kubelet-net-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	began := time.Now()
	c, err := cluster.Start(ctx, dir, cluster.Options{BinDir: bin, ClusterCIDR: twoNodeClusterCIDR})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("start control plane: %v", err)
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	prefix := "e2e-net-" + hex.EncodeToString(b[:])
	m, err := c.StartMachines(ctx, cluster.MachinesOptions{
		Agent: agentBinary, Nodes: []string{prefix + "-a", prefix + "-b"}, CNIBinDir: cniBin, LAN: twoNodeLAN,
		DNS: cluster.DNSOptions{Image: dnsImage},
		// As every e2e agent: eviction and image GC off.
		AgentArgs: []string{"--eviction-hard=", "--image-gc-high-threshold", "100", "--image-gc-low-threshold", "99", "-v", "2"},
	})
	if err != nil {
		c.Stop()
		os.RemoveAll(dir)
		t.Fatalf("start machines: %v", err)
	}
	tn := &twoNodes{c: c, m: m, a: m.Nodes[0], b: m.Nodes[1]}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range m.Nodes {
				t.Logf("agent log of %s:\n%s", n.Name, tailFile(n.Agent.LogPath, 60))
				t.Logf("kube-proxy log of %s:\n%s", n.Name, tailFile(filepath.Join(dir, "kube-proxy-"+n.Name+".log"), 20))
			}
		}
		m.Stop()
		c.Stop()
		os.RemoveAll(dir)
	})
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	ready := time.Since(began)
	if err := m.WaitCoreDNS(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("two nodes Ready %v and CoreDNS available %v after the control plane's start", ready.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))
	return tn
}

// hackCheck runs hack/<script> --check, which prints what it would build
// (a directory, an image) if it is built, and fails saying so otherwise.
func hackCheck(root, script string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", script), "--check")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/%s --check: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// builtTool is what hack/<script> built for the tests (a binary's path):
// a test without it fails under CI=true and is skipped otherwise.
func builtTool(t *testing.T, script string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := hackCheck(root, script)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("%v", err)
	}
	return out
}

func tailFile(path string, lines int) string {
	data, _ := os.ReadFile(path)
	return tail(strings.TrimRight(string(data), "\n"), lines)
}

// remoteAddrScript serves, on port 8081, /cgi-bin/ip: the client's address
// as the server sees it (busybox httpd's CGI), so a test can tell a pod's
// own address from a masqueraded one.
const remoteAddrScript = `mkdir -p /www/cgi-bin && printf '#!/bin/sh\necho Content-Type: text/plain\necho\necho $REMOTE_ADDR\n' >/www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && exec httpd -f -p 8081 -h /www`

// hostPort is the host port of the hostPort pod: free on every machine,
// whose ports are their own.
const hostPort = 28080

// Pods on two nodes reach each other by pod IP, unmasqueraded, and through
// Services: a ClusterIP Service of pods on both nodes answers from pods on
// each node, by IP, by its full name and by its short name, through the
// agents' cluster DNS (CoreDNS) and each machine's kube-proxy; a headless
// Service resolves to the pods' IPs; a NodePort answers on each node's IP;
// a hostPort answers on its node's IP only.
func TestTwoNodeCluster(t *testing.T) {
	t.Parallel()
	tn := startTwoNodes(t)
	c := tn.c.Admin()
	ns := testNamespace(t, tn.c)
	ctx := context.Background()

	web := func(name, node string) {
		spec := onNode(node,
			v1.Container{Name: "web", Image: testImage, ImagePullPolicy: v1.PullNever,
				Ports:          []v1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}},
			v1.Container{Name: "ip", Image: testImage, ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", remoteAddrScript}},
		)
		_, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}}, Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	web("web-a", tn.a.Name)
	web("web-b", tn.b.Name)
	createPod(t, c, ns, "client-a", onNode(tn.a.Name, sleepy("client")))
	createPod(t, c, ns, "client-b", onNode(tn.b.Name, sleepy("client")))
	createPod(t, c, ns, "hostport", onNode(tn.a.Name, v1.Container{Name: "web", Image: testImage, ImagePullPolicy: v1.PullNever,
		Ports: []v1.ContainerPort{{ContainerPort: 8080, HostPort: hostPort}}}))
	ports := []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}
	for _, svc := range []*v1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: ports}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-headless"}, Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: ports, ClusterIP: v1.ClusterIPNone}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-np"}, Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: ports, Type: v1.ServiceTypeNodePort}},
	} {
		if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPodsRunning(t, c, ns, 5, true, startupWait)
	pods := map[string]*v1.Pod{}
	for _, name := range []string{"web-a", "web-b", "client-a", "client-b", "hostport"} {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods[name] = p
	}
	waitEndpoints(t, c, ns, "web", 2)
	svc, err := c.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, err := c.CoreV1().Services(ns).Get(ctx, "web-np", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clients := []struct{ pod, node string }{{"client-a", tn.a.Name}, {"client-b", tn.b.Name}}

	t.Run("PodIPs", func(t *testing.T) {
		for _, p := range pods {
			_, cidr, err := net.ParseCIDR(nodePodCIDR(t, c, p.Spec.NodeName))
			if err != nil {
				t.Fatal(err)
			}
			if ip := net.ParseIP(p.Status.PodIP); ip == nil || !cidr.Contains(ip) {
				t.Errorf("pod %s on %s: IP %q outside the node's podCIDR %s", p.Name, p.Spec.NodeName, p.Status.PodIP, cidr)
			}
		}
	})

	// A pod on one node reaches a pod on the other by its IP, and is seen
	// there by its own IP: no NAT between pods.
	t.Run("PodToPodAcrossNodes", func(t *testing.T) {
		for _, x := range []struct{ from, node, to string }{{"client-a", tn.a.Name, "web-b"}, {"client-b", tn.b.Name, "web-a"}} {
			out, err := podExec(x.node, ns, x.from, "client", "timeout", "5", "wget", "-qO-", fmt.Sprintf("http://%s:8081/cgi-bin/ip", pods[x.to].Status.PodIP))
			if err != nil {
				t.Errorf("%s → %s: %v", x.from, x.to, err)
				continue
			}
			if got := strings.Trim(strings.TrimSpace(out), "[]"); strings.TrimPrefix(got, "::ffff:") != pods[x.from].Status.PodIP {
				t.Errorf("%s → %s: seen from %q, want the client's pod IP %s", x.from, x.to, got, pods[x.from].Status.PodIP)
			}
		}
	})

	// The ClusterIP Service answers in pods of each node, from its pods on
	// both nodes, by IP, full name and short name, and on each node itself
	// (its machine's namespace: kube-proxy's rules for the node's own
	// connections).
	t.Run("ClusterIPFromEachNode", func(t *testing.T) {
		for _, n := range []*cluster.Node{tn.a, tn.b} {
			seen := map[string]bool{}
			var last error
			err := inNetNS(n.NetNS, func() error {
				for i := 0; i < 30 && len(seen) < 2; i++ {
					_, body, err := httpRoundTrip(net.JoinHostPort(svc.Spec.ClusterIP, "80"))
					if last = err; err == nil {
						seen[strings.TrimSpace(body)] = true
					}
				}
				return nil
			})
			if err != nil {
				t.Errorf("node %s: %v", n.Name, err)
			} else if !seen["ok web-a"] || !seen["ok web-b"] {
				t.Errorf("node %s → %s:80: answers %v, want both pods' (last error: %v)", n.Name, svc.Spec.ClusterIP, keysOf(seen), last)
			}
		}
		for _, cl := range clients {
			for _, host := range []string{svc.Spec.ClusterIP, "web." + ns + ".svc.cluster.local", "web"} {
				seen := map[string]bool{}
				var last string
				for i := 0; i < 30 && len(seen) < 2; i++ {
					out, err := podExec(cl.node, ns, cl.pod, "client", "timeout", "5", "wget", "-qO-", "http://"+host+"/")
					last = fmt.Sprintf("%q %v", out, err)
					if err == nil {
						seen[strings.TrimSpace(out)] = true
					}
				}
				if !seen["ok web-a"] || !seen["ok web-b"] {
					t.Errorf("%s (on %s) → http://%s/: answers %v, want both pods' (last: %s)", cl.pod, cl.node, host, keysOf(seen), last)
				}
			}
		}
	})

	// A headless Service's name is its ready pods' IPs.
	t.Run("HeadlessResolvesToPodIPs", func(t *testing.T) {
		for _, cl := range clients {
			out, err := podExec(cl.node, ns, cl.pod, "client", "nslookup", "web-headless."+ns+".svc.cluster.local")
			if err != nil {
				t.Errorf("%s: nslookup: %v: %s", cl.pod, err, out)
				continue
			}
			got := addressesIn(out)
			want := []string{pods["web-a"].Status.PodIP, pods["web-b"].Status.PodIP}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: web-headless resolves to %v, want %v:\n%s", cl.pod, got, want, out)
			}
		}
	})

	// The NodePort answers on each node's IP (from this host, outside the
	// machines), from pods of both nodes.
	t.Run("NodePortOnEachNode", func(t *testing.T) {
		port := np.Spec.Ports[0].NodePort
		for _, n := range []*cluster.Node{tn.a, tn.b} {
			seen := map[string]bool{}
			var last string
			for i := 0; i < 30 && len(seen) < 2; i++ {
				code, body := httpGetNew(fmt.Sprintf("http://%s:%d/", n.IP, port))
				last = fmt.Sprintf("%d %q", code, body)
				if code == 200 {
					seen[strings.TrimSpace(body)] = true
				}
			}
			if !seen["ok web-a"] || !seen["ok web-b"] {
				t.Errorf("node %s NodePort %s:%d: answers %v, want both pods' (last: %s)", n.Name, n.IP, port, keysOf(seen), last)
			}
		}
	})

	// A hostPort answers on its node's IP, from this host and from a pod
	// of the other node; the other node's IP has no such port.
	t.Run("HostPortOnItsNode", func(t *testing.T) {
		url := fmt.Sprintf("http://%s:%d/", tn.a.IP, hostPort)
		if code, body := httpGet(url); code != 200 || strings.TrimSpace(body) != "ok hostport" {
			t.Errorf("GET %s from the host: %d %q", url, code, body)
		}
		if out, err := podExec(tn.b.Name, ns, "client-b", "client", "timeout", "5", "wget", "-qO-", url); err != nil || strings.TrimSpace(out) != "ok hostport" {
			t.Errorf("GET %s from client-b: %q, %v", url, out, err)
		}
		if code, body := httpGet(fmt.Sprintf("http://%s:%d/", tn.b.IP, hostPort)); code != 0 {
			t.Errorf("node %s answers on the host port of a pod of node %s: %d %q", tn.b.Name, tn.a.Name, code, body)
		}
	})

	// Round trips from client-a's network namespace (one new connection and
	// one HTTP request each), reported, not asserted.
	t.Run("RoundTrip", func(t *testing.T) {
		netns := fmt.Sprintf("/proc/%d/ns/net", infraPID(t, tn.a.Name, ns, "client-a"))
		for _, target := range []struct{ what, addr string }{
			{"pod on the same node", pods["web-a"].Status.PodIP + ":8080"},
			{"pod on the other node", pods["web-b"].Status.PodIP + ":8080"},
			{"ClusterIP", svc.Spec.ClusterIP + ":80"},
		} {
			var times []time.Duration
			err := inNetNS(netns, func() error {
				for range 50 {
					d, _, err := httpRoundTrip(target.addr)
					if err != nil {
						return err
					}
					times = append(times, d)
				}
				return nil
			})
			if err != nil {
				t.Errorf("%s (%s): %v", target.what, target.addr, err)
				continue
			}
			slices.Sort(times)
			t.Logf("client-a → %s (%s): median %v, p90 %v of %d requests", target.what, target.addr,
				times[len(times)/2].Round(time.Microsecond), times[len(times)*9/10].Round(time.Microsecond), len(times))
		}
	})
}

// httpGetNew is httpGet on a new connection: kube-proxy balances
// connections, not requests.
func httpGetNew(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// nodePodCIDR is a node's podCIDR.
func nodePodCIDR(t *testing.T, c kubernetes.Interface, node string) string {
	t.Helper()
	return getNode(t, c, node).Spec.PodCIDR
}

// waitEndpoints waits until the Service's EndpointSlices hold n ready
// endpoints.
func waitEndpoints(t *testing.T, c kubernetes.Interface, ns, svc string, n int) {
	t.Helper()
	waitFor(t, time.Minute, func() (bool, string) {
		l, err := c.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				if ptr.Deref(e.Conditions.Ready, false) {
					ready++
				}
			}
		}
		return ready == n, fmt.Sprintf("service %s/%s: %d ready endpoints, want %d", ns, svc, ready, n)
	})
}

// podContainer finds a container of a pod of node by its labels.
func podContainer(node, ns, pod, container string) (docker.APIContainers, error) {
	list, err := dockerc.ListContainers(docker.ListContainersOptions{Filters: map[string][]string{"label": {
		ownerLabel + "=" + node, "io.kubernetes.pod.namespace=" + ns, "io.kubernetes.pod.name=" + pod,
		"io.kubernetes.container.name=" + container,
	}}})
	if err != nil {
		return docker.APIContainers{}, err
	}
	if len(list) != 1 {
		return docker.APIContainers{}, fmt.Errorf("pod %s/%s container %s on %s: %d running", ns, pod, container, node, len(list))
	}
	return list[0], nil
}

// podExec runs a command in a pod's container and returns its output; a
// non-zero exit is an error.
func podExec(node, ns, pod, container string, cmd ...string) (string, error) {
	ctr, err := podContainer(node, ns, pod, container)
	if err != nil {
		return "", err
	}
	ex, err := dockerc.CreateExec(docker.CreateExecOptions{Container: ctr.ID, Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := dockerc.StartExec(ex.ID, docker.StartExecOptions{OutputStream: &out, ErrorStream: &out}); err != nil {
		return out.String(), err
	}
	st, err := dockerc.InspectExec(ex.ID)
	if err != nil {
		return out.String(), err
	}
	if st.ExitCode != 0 {
		return out.String(), fmt.Errorf("%v: exit %d: %s", cmd, st.ExitCode, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// infraPID is the PID of a pod's infra container, whose network namespace
// is the pod's.
func infraPID(t *testing.T, node, ns, pod string) int {
	t.Helper()
	ctr, err := podContainer(node, ns, pod, "POD")
	if err != nil {
		t.Fatal(err)
	}
	return inspect(t, ctr.ID).State.Pid
}

// inNetNS runs fn on an OS thread moved into the network namespace at path
// (/proc/<pid>/ns/net, a machine's /run/netns/...): the sockets fn makes are
// that namespace's. The thread is never unlocked, so Go ends it with the
// goroutine instead of reusing it.
func inNetNS(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// httpRoundTrip connects to addr, sends one HTTP/1.0 GET / and reads the
// answer to its end, on the calling goroutine (so in its namespace), and
// returns the time it took and the answer's body.
func httpRoundTrip(addr string) (time.Duration, string, error) {
	start := time.Now()
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).Dial("tcp", addr)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\nHost: web\r\n\r\n"); err != nil {
		return 0, "", err
	}
	answer, err := io.ReadAll(conn)
	if err != nil {
		return 0, "", err
	}
	took := time.Since(start)
	if !bytes.HasPrefix(answer, []byte("HTTP/1.0 200")) {
		return 0, "", fmt.Errorf("GET %s: %q", addr, answer)
	}
	_, body, _ := bytes.Cut(answer, []byte("\r\n\r\n"))
	return took, string(body), nil
}

// addressesIn are the IPv4 addresses of nslookup's answer (after the
// server's own lines), sorted.
func addressesIn(out string) []string {
	var got []string
	_, answer, _ := strings.Cut(out, "Name:")
	for _, f := range strings.Fields(answer) {
		if ip := net.ParseIP(f); ip != nil && ip.To4() != nil {
			got = append(got, f)
		}
	}
	slices.Sort(got)
	return got
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
