package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/classic-kubelet/kubelet/test/cluster"
)

// The TLS bootstrap tests join agents with a bootstrap token only, as
// `kubeadm join` does: the client certificate comes from a CSR that
// kube-controller-manager approves (csrapproving) and signs (csrsigning),
// and is renewed before it expires; the serving certificate from a CSR
// that an administrator approves.

// bootstrapNode starts an agent as a node of c that has only a bootstrap
// kubeconfig (and the cluster's serving certificate for its port): its
// --kubeconfig, <root-dir>/kubelet.conf, does not exist yet. Its Node is
// deleted once it stopped.
func bootstrapNode(t *testing.T, c *cluster.Cluster, bootKubeconfig string, extraArgs ...string) *agent {
	t.Helper()
	node := deleteNodeAfter(t, c)
	return startAgentWith(t, func(a *agent) {
		*node = a.node
		creds, err := c.NodeCredentials(a.node, c.Address)
		if err != nil {
			t.Fatal(err)
		}
		a.port = freePortOn(t, c.Address)
		a.extraArgs = append([]string{"--bootstrap-kubeconfig", bootKubeconfig,
			"--kubeconfig", filepath.Join(a.rootDir, "kubelet.conf"), "--node-ip", c.Address, "--address", c.Address,
			"--tls-cert-file", creds.CertFile, "--tls-private-key-file", creds.KeyFile, "--client-ca-file", creds.ClientCAFile,
			"--authentication-token-webhook", "--authorization-mode=Webhook",
		}, a.extraArgs...)
	}, extraArgs...)
}

// deleteNodeAfter deletes, once the test ends, the Node named by what it
// returns: registered before the agent starts, it runs after the agent's
// cleanup stopped it (cleanups run last first), which would register the
// Node again.
func deleteNodeAfter(t *testing.T, c *cluster.Cluster) *string {
	var node string
	t.Cleanup(func() {
		if node != "" {
			_ = c.Admin().CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		}
	})
	return &node
}

// nodeCSRs are the node's CSRs of one signer, oldest first: those its
// bootstrap token made, and those it made itself.
func nodeCSRs(t *testing.T, c kubernetes.Interface, node, signer string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	l, err := c.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, csr := range l.Items {
		block, _ := pem.Decode(csr.Spec.Request)
		if block == nil || csr.Spec.SignerName != signer {
			continue
		}
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err == nil && req.Subject.CommonName == "system:node:"+node {
			out = append(out, csr)
		}
	}
	for i := 1; i < len(out); i++ { // few: insertion sort by creation
		for j := i; j > 0 && out[j].CreationTimestamp.Before(&out[j-1].CreationTimestamp); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func csrCondition(csr *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range csr.Status.Conditions {
		if csr.Status.Conditions[i].Type == typ {
			return &csr.Status.Conditions[i]
		}
	}
	return nil
}

// currentCert reads a pair the agent keeps in its cert dir (prefix
// kubelet-client or kubelet-server), through its -current.pem link.
func currentCert(t *testing.T, a *agent, prefix string) (*x509.Certificate, string) {
	t.Helper()
	link := filepath.Join(a.rootDir, "pki", prefix+"-current.pem")
	target, err := os.Readlink(link)
	if err != nil {
		return nil, ""
	}
	data, err := os.ReadFile(link)
	if err != nil {
		return nil, ""
	}
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatalf("%s: %v", link, err)
			}
			return cert, target
		}
	}
	t.Fatalf("%s: no certificate", link)
	return nil, ""
}

// delayedProxy forwards TCP connections on a loopback port to target, but
// only after delay: until then the port refuses them, as an API server not
// yet up.
func delayedProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		go func() { <-ctx.Done(); l.Close() }()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go forward(ctx, in, target)
		}
	})
	return addr
}

func forward(ctx context.Context, in net.Conn, target string) {
	defer in.Close()
	out, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
	if err != nil {
		return
	}
	defer out.Close()
	go func() { <-ctx.Done(); in.Close(); out.Close() }()
	go func() { _, _ = io.Copy(out, in); out.Close() }()
	_, _ = io.Copy(in, out)
}

// proxiedBootstrapKubeconfig is a bootstrap kubeconfig of c whose server is
// a delayed proxy to c's API server (whose certificate is valid for
// 127.0.0.1).
func proxiedBootstrapKubeconfig(t *testing.T, c *cluster.Cluster, delay time.Duration) string {
	t.Helper()
	boot, err := c.BootstrapKubeconfig(context.Background(), cluster.KubeadmNodeGroup, true)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(boot)
	if err != nil {
		t.Fatal(err)
	}
	proxy := delayedProxy(t, strings.TrimPrefix(c.Server, "https://"), delay)
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + proxy
	}
	path := filepath.Join(t.TempDir(), "bootstrap-kubelet.conf")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// An agent with only a bootstrap token joins: its CSR is auto-approved and
// signed, the certificate kept as kubelet-client-<time>.pem behind
// kubelet-client-current.pem, --kubeconfig written to use it, and the Node
// is Ready and runs a pod. The API server is unreachable for the first
// seconds: the request is retried. A restart uses the certificate, not the
// token (no new CSR).
func TestTLSBootstrapJoins(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	admin := c.Admin()
	boot := proxiedBootstrapKubeconfig(t, c, 5*time.Second)
	a := bootstrapNode(t, c, boot, "--rotate-certificates")
	waitNodeReady(t, admin, a.node, startupWait)

	csrs := nodeCSRs(t, admin, a.node, certificatesv1.KubeAPIServerClientKubeletSignerName)
	if len(csrs) != 1 || csrCondition(&csrs[0], certificatesv1.CertificateApproved) == nil ||
		!strings.HasPrefix(csrs[0].Spec.Username, "system:bootstrap:") {
		t.Fatalf("client CSRs of the node: %+v, want one approved, made by the bootstrap token", csrs)
	}
	checkClientCert(t, a, &csrs[0])
	if log := a.log(); !strings.Contains(log, "TLS bootstrap (no kubeconfig)") || !strings.Contains(log, "connection refused") {
		t.Errorf("agent log shows no bootstrap, or no retry while the API server was unreachable:\n%s", tail(log, 40))
	}
	_, ns := readyNode(t, c, a)
	createPod(t, admin, ns, "web", onNode(a.node, sleepy("app")))
	waitPodPhase(t, admin, ns, "web", v1.PodRunning, startupWait)
	_, metrics := httpGet(a.api(true) + "/metrics")
	if !strings.Contains(metrics, "kubelet_certificate_manager_client_ttl_seconds ") ||
		!strings.Contains(metrics, "kubelet_certificate_manager_client_expiration_renew_errors ") {
		t.Errorf("/metrics lacks the client certificate's metrics")
	}

	a.stop(syscall.SIGTERM)
	a.start()
	waitNodeReady(t, admin, a.node, startupWait)
	waitPodPhase(t, admin, ns, "web", v1.PodRunning, startupWait)
	if n := len(nodeCSRs(t, admin, a.node, certificatesv1.KubeAPIServerClientKubeletSignerName)); n != 1 {
		t.Errorf("%d client CSRs after a restart, want the first only: the restarted agent uses its certificate", n)
	}
}

// checkClientCert checks the issued client certificate and the kubeconfig
// written for it.
func checkClientCert(t *testing.T, a *agent, csr *certificatesv1.CertificateSigningRequest) {
	t.Helper()
	cert, target := currentCert(t, a, "kubelet-client")
	if cert == nil || !strings.HasPrefix(filepath.Base(target), "kubelet-client-") || strings.HasSuffix(target, "current.pem") {
		t.Fatalf("kubelet-client-current.pem links to %q, want kubelet-client-<time>.pem", target)
	}
	if cert.Subject.CommonName != "system:node:"+a.node || strings.Join(cert.Subject.Organization, ",") != "system:nodes" ||
		len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("client certificate %v, usages %v", cert.Subject, cert.ExtKeyUsage)
	}
	usages := fmt.Sprint(csr.Spec.Usages)
	if !strings.Contains(usages, "digital signature") || !strings.Contains(usages, "client auth") {
		t.Errorf("CSR usages %s", usages)
	}
	kc, err := clientcmd.LoadFromFile(filepath.Join(a.rootDir, "kubelet.conf"))
	if err != nil {
		t.Fatal(err)
	}
	pemPath := filepath.Join(a.rootDir, "pki", "kubelet-client-current.pem")
	if auth := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]; auth.ClientCertificate != pemPath || auth.ClientKey != pemPath {
		t.Errorf("--kubeconfig authenticates with %+v, want %s", auth, pemPath)
	}
}

// A CSR an administrator denies is logged by name, the agent keeps running
// its static pod, and asks again; the next CSR, approved, joins the node.
func TestTLSBootstrapDeniedCSR(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	admin := c.Admin()
	// A group whose CSRs nothing approves.
	boot, err := c.BootstrapKubeconfig(context.Background(), "system:bootstrappers:e2e-manual-approval", false)
	if err != nil {
		t.Fatal(err)
	}
	a := bootstrapNode(t, c, boot)
	a.writeManifest("static.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: static}
spec:
  containers:
  - {name: app, image: %s, imagePullPolicy: Never, command: [sleep, "100000"]}
`, testImage))
	running := a.waitRunning("static", "app")

	var first string
	waitFor(t, startupWait, func() (bool, string) {
		csrs := nodeCSRs(t, admin, a.node, certificatesv1.KubeAPIServerClientKubeletSignerName)
		if len(csrs) > 0 {
			first = csrs[0].Name
		}
		return first != "", "no CSR of the node yet"
	})
	if out, err := c.Kubectl("certificate", "deny", first); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	waitFor(t, time.Minute, func() (bool, string) {
		return strings.Contains(a.log(), "CertificateSigningRequest "+first+" (signer kubernetes.io/kube-apiserver-client-kubelet) was denied"),
			"agent log does not name the denied CSR " + first
	})
	if again := a.waitRunning("static", "app"); again["app"].ID != running["app"].ID {
		t.Errorf("static pod's container changed from %s to %s after the denial", running["app"].ID, again["app"].ID)
	}

	var next string
	waitFor(t, time.Minute, func() (bool, string) {
		for _, csr := range nodeCSRs(t, admin, a.node, certificatesv1.KubeAPIServerClientKubeletSignerName) {
			if csr.Name != first && csrCondition(&csr, certificatesv1.CertificateDenied) == nil {
				next = csr.Name
			}
		}
		return next != "", "no new CSR after the denial"
	})
	if out, err := c.Kubectl("certificate", "approve", next); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	waitNodeReady(t, admin, a.node, startupWait)
}

// With --rotate-server-certificates and no --tls-cert-file the full-access
// port fails every handshake until the node's serving CSR (its IP and host
// name) is approved with kubectl; then it serves the issued certificate,
// and kubectl logs goes through it (the API server checks it against the
// cluster CA).
func TestTLSBootstrapServingCertificate(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	admin := c.Admin()
	node := deleteNodeAfter(t, c)
	a := startAgentWith(t, func(a *agent) {
		*node = a.node
		creds, err := c.NodeCredentials(a.node, c.Address)
		if err != nil {
			t.Fatal(err)
		}
		a.port = freePortOn(t, c.Address)
		a.extraArgs = append(a.extraArgs, "--kubeconfig", creds.Kubeconfig, "--node-ip", c.Address, "--address", c.Address,
			"--client-ca-file", creds.ClientCAFile, "--authentication-token-webhook", "--authorization-mode=Webhook",
			"--rotate-server-certificates")
	})
	_, ns := readyNode(t, c, a)
	addr := net.JoinHostPort(c.Address, fmt.Sprint(a.port))

	var csr certificatesv1.CertificateSigningRequest
	waitFor(t, startupWait, func() (bool, string) {
		csrs := nodeCSRs(t, admin, a.node, certificatesv1.KubeletServingSignerName)
		if len(csrs) == 0 {
			return false, "no serving CSR of the node"
		}
		csr = csrs[0]
		return true, ""
	})
	checkServingCSR(t, &csr, c.Address)
	if conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}); err == nil {
		conn.Close()
		t.Fatalf("the full-access port completed a handshake before its serving certificate was issued")
	}
	if out, err := c.Kubectl("certificate", "approve", csr.Name); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(c.CAFile)
	pool.AppendCertsFromPEM(ca)
	waitFor(t, time.Minute, func() (bool, string) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: c.Address})
		if err != nil {
			return false, fmt.Sprintf("TLS to %s: %v", addr, err)
		}
		defer conn.Close()
		cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName
		return cn == "system:node:"+a.node, "serving " + cn
	})

	spec := onNode(a.node, v1.Container{Name: "app", Image: testImage, ImagePullPolicy: v1.PullNever,
		Command: []string{"sh", "-c", "echo hello from " + a.node + "; exec sleep 100000"}})
	createPod(t, admin, ns, "talker", spec)
	waitPodPhase(t, admin, ns, "talker", v1.PodRunning, startupWait)
	waitFor(t, 30*time.Second, func() (bool, string) {
		out, err := c.Kubectl("-n", ns, "logs", "talker")
		return err == nil && strings.Contains(out, "hello from "+a.node), fmt.Sprintf("kubectl logs: %q, %v", out, err)
	})
	if _, metrics := httpGet(a.api(true) + "/metrics"); !strings.Contains(metrics, "kubelet_certificate_manager_server_ttl_seconds ") {
		t.Error("/metrics lacks kubelet_certificate_manager_server_ttl_seconds")
	}
}

// checkServingCSR checks a serving CSR as the kubelet makes it.
func checkServingCSR(t *testing.T, csr *certificatesv1.CertificateSigningRequest, ip string) {
	t.Helper()
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if strings.Join(req.Subject.Organization, ",") != "system:nodes" || fmt.Sprint(req.IPAddresses) != "["+ip+"]" ||
		fmt.Sprint(req.DNSNames) != "["+host+"]" || !strings.Contains(fmt.Sprint(csr.Spec.Usages), "server auth") {
		t.Errorf("serving CSR %s: O %v, IPs %v, names %v, usages %v", csr.Name, req.Subject.Organization, req.IPAddresses, req.DNSNames, csr.Spec.Usages)
	}
}

// signingDuration is the rotation test's certificate lifetime. The signer
// backdates each certificate 5 minutes, so one of 3 minutes lives 8, and
// its renewal (at 70–90 % of that) comes 0.6–2.2 minutes after it was
// issued; a shorter one would be due for renewal the moment it is issued.
const signingDuration = 3 * time.Minute

// The client certificate, signed for 3 minutes by a control plane of the
// test's own (--cluster-signing-duration: the shared one signs for a year),
// is renewed by a CSR the node makes with its own certificate, and used
// without a restart: after the first certificate expired, the node's Lease
// is still renewed, the Node never went NotReady, and its pod kept its
// container. It waits 4 minutes on the certificate's lifetime: make scale
// runs it, make test does not (its TLS bootstrap tests stay there).
func TestCertificateRotation(t *testing.T) {
	t.Parallel()
	sharedCluster(t) // skips (or fails under CI) as the shared one would
	c := signingCluster(t, signingDuration)
	admin := c.Admin()
	boot, err := c.BootstrapKubeconfig(context.Background(), cluster.KubeadmNodeGroup, true)
	if err != nil {
		t.Fatal(err)
	}
	a := bootstrapNode(t, c, boot, "--rotate-certificates")
	_, ns := readyNode(t, c, a)
	createPod(t, admin, ns, "web", onNode(a.node, sleepy("app")))
	pod := waitPodPhase(t, admin, ns, "web", v1.PodRunning, startupWait)
	first, _ := currentCert(t, a, "kubelet-client")
	if first == nil || first.NotAfter.Sub(first.NotBefore) > signingDuration+6*time.Minute {
		t.Fatalf("first client certificate %v: want one of %v (backdated 5m)", first, signingDuration)
	}

	// Until the first certificate has expired (and a little more, for a
	// Lease renewal after it), the node stays Ready.
	var renewed *x509.Certificate
	waitFor(t, time.Until(first.NotAfter)+time.Minute, func() (bool, string) {
		if n := getNode(t, admin, a.node); !nodeReady(n) {
			t.Fatalf("node NotReady during rotation: %+v", n.Status.Conditions)
		}
		if cur, _ := currentCert(t, a, "kubelet-client"); cur != nil && cur.SerialNumber.Cmp(first.SerialNumber) != 0 {
			renewed = cur
		}
		return renewed != nil && time.Now().After(first.NotAfter.Add(20*time.Second)),
			fmt.Sprintf("renewed %v; first expires at %v", renewed != nil, first.NotAfter)
	})
	lease, err := admin.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), a.node, metav1.GetOptions{})
	if err != nil || lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(first.NotAfter) {
		t.Errorf("Lease %v (%v) not renewed after the first certificate expired at %v", lease, err, first.NotAfter)
	}
	csrs := nodeCSRs(t, admin, a.node, certificatesv1.KubeAPIServerClientKubeletSignerName)
	if len(csrs) < 2 || csrs[1].Spec.Username != "system:node:"+a.node || csrCondition(&csrs[1], certificatesv1.CertificateApproved) == nil {
		t.Errorf("renewal CSR: %d CSRs, want the second made by system:node:%s and auto-approved", len(csrs), a.node)
	}
	now, err := admin.CoreV1().Pods(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || now.Status.ContainerStatuses[0].ContainerID != pod.Status.ContainerStatuses[0].ContainerID ||
		now.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("pod after rotation: %v, %v; want its first container", now, err)
	}
	if !strings.Contains(a.log(), "Client certificate rotated") {
		t.Error("agent log does not show the API client taking the new certificate")
	}
}

// signingCluster starts a control plane of the test's own whose
// kube-controller-manager signs certificates for d.
func signingCluster(t *testing.T, d time.Duration) *cluster.Cluster {
	t.Helper()
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
	began := time.Now()
	c, err := cluster.Start(ctx, dir, cluster.Options{BinDir: bin, ControllerManagerArgs: []string{"--cluster-signing-duration=" + d.String()}})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Logf("control plane signing for %v started in %v", d, time.Since(began).Round(100*time.Millisecond))
	t.Cleanup(func() { c.Stop(); os.RemoveAll(dir) })
	return c
}

// A --tls-cert-file pair replaced on disk serves new handshakes within the
// reload period, without a restart.
func TestCertificateFilesReloaded(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	a := startNode(t)
	waitNodeReady(t, c.Admin(), a.node, startupWait)
	addr := net.JoinHostPort(c.Address, fmt.Sprint(a.port))
	// serial is the serving certificate's serial number, "" if no handshake.
	serial := func() string {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return ""
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	if before == "" {
		t.Fatalf("no TLS handshake with %s", addr)
	}
	if _, err := c.NodeCredentials(a.node, c.Address); err != nil { // a new serving pair in the same files
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		now := serial()
		return now != "" && now != before, fmt.Sprintf("serving serial %q, before %q", now, before)
	})
}
