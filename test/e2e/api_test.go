package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestStatsAndMetrics(t *testing.T) {
	a := startAgent(t, "--housekeeping-interval", "1s")
	a.writeManifest("busy.yaml", lifecyclePod("busy", "Always", `  containers:
  - name: spin
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while :; do :; done"]
    resources: {limits: {cpu: 200m, memory: 32Mi}}
`))
	running := a.waitRunning("busy", "spin")
	waitFor(t, 20*time.Second, func() (bool, string) {
		return a.status("busy").condition("Ready") == "True", "not ready"
	})

	var summary struct {
		Node struct {
			NodeName string `json:"nodeName"`
			CPU      struct {
				UsageCoreNanoSeconds uint64 `json:"usageCoreNanoSeconds"`
			} `json:"cpu"`
			Fs struct {
				CapacityBytes uint64 `json:"capacityBytes"`
			} `json:"fs"`
		} `json:"node"`
		Pods []struct {
			PodRef struct {
				Name string `json:"name"`
			} `json:"podRef"`
			Containers []struct {
				Name string `json:"name"`
				CPU  struct {
					UsageNanoCores       uint64 `json:"usageNanoCores"`
					UsageCoreNanoSeconds uint64 `json:"usageCoreNanoSeconds"`
				} `json:"cpu"`
				Memory struct {
					WorkingSetBytes uint64 `json:"workingSetBytes"`
					UsageBytes      uint64 `json:"usageBytes"`
				} `json:"memory"`
			} `json:"containers"`
		} `json:"pods"`
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		code, body := httpGet(a.api(true) + "/stats/summary")
		if code != 200 || json.Unmarshal([]byte(body), &summary) != nil {
			return false, fmt.Sprintf("summary %d %s", code, body)
		}
		for _, p := range summary.Pods {
			for _, c := range p.Containers {
				if p.PodRef.Name == "busy" && c.Name == "spin" && c.CPU.UsageNanoCores > 10_000_000 && c.Memory.UsageBytes > 0 {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("no busy CPU and memory in the summary: %s", body)
	})
	if summary.Node.NodeName != a.node || summary.Node.CPU.UsageCoreNanoSeconds == 0 || summary.Node.Fs.CapacityBytes == 0 {
		t.Errorf("node stats %+v", summary.Node)
	}

	// cAdvisor JSON for the container, by both path forms.
	uid := running["spin"].Labels["io.kubernetes.pod.uid"]
	for _, path := range []string{"/stats/default/busy/" + uid + "/spin?num_stats=2", "/stats/busy_default/spin"} {
		code, body := httpGet(a.api(true) + path)
		if code != 200 || !strings.Contains(body, `"stats"`) || !strings.Contains(body, running["spin"].ID) {
			t.Errorf("GET %s = %d %.300s", path, code, body)
		}
	}
	if code, body := httpGet(a.api(true) + "/spec"); code != 200 || !strings.Contains(body, `"num_cores"`) {
		t.Errorf("GET /spec = %d %.200s", code, body)
	}
	// /runningpods/ lists the pod as found in Docker; /configz the agent's
	// options (both on the full-access port only).
	if code, body := httpGet(a.api(false) + "/runningpods/"); code != 200 || !strings.Contains(body, `"name": "busy"`) ||
		!strings.Contains(body, running["spin"].ID) {
		t.Errorf("GET /runningpods/ = %d %.400s", code, body)
	}
	if code, body := httpGet(a.api(false) + "/configz"); code != 200 || !strings.Contains(body, `"hostnameOverride": "`+a.node+`"`) {
		t.Errorf("GET /configz = %d %.400s", code, body)
	}

	// Both metric endpoints parse as Prometheus text.
	families := func(path string) map[string]*dto.MetricFamily {
		resp, err := http.Get(a.api(true) + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mf, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		return mf
	}
	own := families("/metrics")
	for _, name := range []string{"kubelet_pleg_relist_duration_seconds", "kubelet_runtime_operations_duration_seconds",
		"kubelet_sync_loop_iteration_duration_seconds", "kubelet_pod_worker_duration_seconds", "kubelet_running_pods"} {
		if own[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	waitFor(t, 20*time.Second, func() (bool, string) {
		cpu := families("/metrics/cadvisor")["container_cpu_usage_seconds_total"]
		if cpu == nil {
			return false, "no container_cpu_usage_seconds_total"
		}
		for _, m := range cpu.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pod"] == "busy" && labels["namespace"] == "default" && labels["container"] == "spin" {
				return true, ""
			}
		}
		return false, "no CPU metric labelled pod=busy container=spin"
	})
}

func TestContainerLogsAndExec(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--backoff-initial", "1s", "--backoff-max", "1s")
	a.writeManifest("talk.yaml", lifecyclePod("talk", "Always", `  containers:
  - name: lines
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo line1; echo line2; echo line3; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.3; done"]
  - name: crash
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo instance $(cat /proc/sys/kernel/random/uuid); sleep 1; exit 1"]
`))
	a.waitRunning("talk", "lines", "crash")
	base := a.api(false) + "/containerLogs/default/talk/"
	waitFor(t, 10*time.Second, func() (bool, string) {
		code, body := httpGet(base + "lines")
		return code == 200 && strings.HasPrefix(body, "line1\nline2\nline3\n"), fmt.Sprintf("%d %q", code, body)
	})
	code, body := httpGet(base + "lines?tailLines=1&timestamps=true")
	if code != 200 || strings.Count(body, "\n") != 1 || !strings.Contains(body, "tick") || !strings.Contains(body, "T") {
		t.Errorf("tailLines=1&timestamps = %d %q", code, body)
	}

	// follow streams lines as they are written.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"lines?follow=true&tailLines=0", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	got := 0
	for got < 3 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "tick") {
			got++
		}
	}
	resp.Body.Close()
	if got < 3 {
		t.Errorf("follow delivered %d new lines", got)
	}

	// previous: the logs of the instance before the current one.
	waitFor(t, 30*time.Second, func() (bool, string) {
		st := a.status("talk")
		for _, cs := range st.ContainerStatuses {
			if cs.Name == "crash" && cs.RestartCount >= 2 {
				return true, ""
			}
		}
		return false, "crash container not restarted twice"
	})
	_, prev := httpGet(base + "crash?previous=true")
	_, cur := httpGet(base + "crash")
	if !strings.HasPrefix(prev, "instance ") || prev == cur {
		t.Errorf("previous logs %q, current %q: want another instance's line", prev, cur)
	}

	// exec returns output and exit code; the read-only port refuses it.
	var res struct {
		ExitCode int    `json:"exitCode"`
		Output   string `json:"output"`
	}
	q := url.Values{"command": {"sh", "-c", "echo hello; exit 3"}}
	code, body = request(t, "POST", a.api(false)+"/exec/default/talk/lines?"+q.Encode(), "")
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || res.ExitCode != 3 || res.Output != "hello\n" {
		t.Errorf("exec = %d %s", code, body)
	}
	code, body = request(t, "POST", a.api(false)+"/run/default/talk/lines?cmd=echo+classic", "")
	if code != 200 || !strings.Contains(body, "classic") {
		t.Errorf("run = %d %s", code, body)
	}
	if code, _ := request(t, "POST", a.api(true)+"/exec/default/talk/lines?command=id", ""); code != 405 {
		t.Errorf("exec on the read-only port = %d, want 405", code)
	}
	if code, _ := httpGet(a.api(true) + "/containerLogs/default/talk/lines"); code != 405 {
		t.Errorf("logs on the read-only port = %d, want 405", code)
	}
}

func TestNodeLogsStayInTheirDirectory(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	os.WriteFile(filepath.Join(logDir, "node.log"), []byte("node says hi\n"), 0o644)
	os.MkdirAll(filepath.Join(logDir, "containers"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(logDir, "passwd"))
	a := startAgent(t, "--node-log-dir", logDir)
	a.writeManifest("pod.yaml", twoContainerPod("logged", "x"))
	running := a.waitRunning("logged", "server", "sidecar")
	// A symlink to a managed container's log file is served.
	logPath := inspect(t, running["server"].ID).LogPath
	os.Symlink(logPath, filepath.Join(logDir, "containers", "logged_default_server.log"))
	a.waitAPI()

	if code, body := httpGet(a.api(false) + "/logs/node.log"); code != 200 || body != "node says hi\n" {
		t.Errorf("/logs/node.log = %d %q", code, body)
	}
	if code, _ := httpGet(a.api(false) + "/logs/containers/logged_default_server.log"); code != 200 {
		t.Errorf("symlink to a managed container log = %d, want 200", code)
	}
	for _, path := range []string{"/logs/passwd", "/logs/../../etc/passwd", "/logs/%2e%2e/%2e%2e/etc/passwd",
		"/logs/%252e%252e/etc/passwd", "/logs/..%5c..%5cetc%5cpasswd", "/logs/containers/../../../etc/passwd"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(a.api(false), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.0\r\n\r\n", path)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 4096)
		n, _ := resp.Body.Read(body)
		conn.Close()
		if resp.StatusCode == 200 || strings.Contains(string(body[:n]), "root:") {
			t.Errorf("GET %s = %d %q: escaped the log directory", path, resp.StatusCode, body[:n])
		}
	}
}

// testPKI makes a CA, a server certificate for 127.0.0.1 and a client
// certificate, as PEM files in dir.
func testPKI(t *testing.T, dir string) (caFile, certFile, keyFile string, client tls.Certificate, pool *x509.CertPool) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, ip net.IP) ([]byte, *ecdsa.PrivateKey) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprint("cert", serial)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte { b, _ := x509.MarshalECPrivateKey(k); return b }
	caFile = write("ca.pem", "CERTIFICATE", caDER)
	srvDER, srvKey := issue(2, x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	certFile, keyFile = write("server.pem", "CERTIFICATE", srvDER), write("server-key.pem", "EC PRIVATE KEY", keyDER(srvKey))
	cliDER, cliKey := issue(3, x509.ExtKeyUsageClientAuth, nil)
	client, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cliDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER(cliKey)}))
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	return caFile, certFile, keyFile, client, pool
}

func TestTLSWithClientCertificates(t *testing.T) {
	t.Parallel()
	caFile, certFile, keyFile, clientCert, pool := testPKI(t, t.TempDir())
	a := startAgent(t, "--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--client-ca-file", caFile)
	a.waitAPI()
	podsURL := fmt.Sprintf("https://127.0.0.1:%d/pods", a.port)
	get := func(certs []tls.Certificate) (int, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
		resp, err := c.Get(podsURL)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get([]tls.Certificate{clientCert}); err != nil || code != 200 {
		t.Errorf("with a client certificate: %d %v", code, err)
	}
	if code, err := get(nil); err == nil {
		t.Errorf("without a client certificate the full-access port answered %d", code)
	}
	if code, _ := httpGet(podsURL); code == 200 {
		t.Error("plain HTTP served on the TLS port")
	}
}

func TestFullAccessPortRefusesOpenAddressWithoutClientCerts(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(agentBinary, "--address", "0.0.0.0", "--port", fmt.Sprint(freePort(t)), "--read-only-port", "0", "--healthz-port", "0",
		"--root-dir", t.TempDir(), "--hostname-override", "e2e-refuse").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to serve the full-access port on 0.0.0.0 to unauthenticated clients") {
		t.Errorf("agent on 0.0.0.0 without client certificates: err %v, output %s", err, out)
	}
}

// Two agents with one node name would own the same containers: the second
// refuses to start, whatever its root dir, naming the first; once the
// first is gone (kill -9 included) the name is free.
func TestSecondAgentWithTheSameNodeNameRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.waitAPI()
	second := func() (string, error) {
		out, err := exec.Command(agentBinary, "--hostname-override", a.node, "--root-dir", t.TempDir(),
			"--port", "0", "--read-only-port", "0", "--healthz-port", "0").CombinedOutput()
		return string(out), err
	}
	out, err := second()
	if err == nil || !strings.Contains(out, "is taken by another agent") || !strings.Contains(out, fmt.Sprintf("pid %d", a.cmd.Process.Pid)) {
		t.Errorf("second agent with node name %s: err %v, output %s", a.node, err, tail(out, 5))
	}
	a.stop(syscall.SIGKILL)
	a.start()
	a.waitAPI()
}

// /stats/summary carries the background disk measurement: a container's
// writable layer and logs, the pod's ephemeral storage (with its emptyDir),
// the image file system, and the agent's and Docker's system containers.
func TestSummaryDiskUsage(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--disk-usage-period", "2s")
	a.writeManifest("disk.yaml", lifecyclePod("disk", "Always", `  containers:
  - name: writer
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "head -c 2097152 /dev/zero > /layer; head -c 3145728 /dev/zero > /scratch/vol; for i in $(seq 1 200); do echo log line $i; done; sleep 3600"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - name: scratch
    emptyDir: {}
`))
	a.waitRunning("disk", "writer")
	var sum statsapi.Summary
	waitFor(t, 30*time.Second, func() (bool, string) {
		code, body := httpGet(a.api(true) + "/stats/summary")
		if code != 200 {
			return false, fmt.Sprintf("%d %s", code, body)
		}
		sum = statsapi.Summary{}
		if err := json.Unmarshal([]byte(body), &sum); err != nil {
			return false, err.Error()
		}
		for _, p := range sum.Pods {
			if p.PodRef.Name != "disk" || len(p.Containers) != 1 {
				continue
			}
			c := p.Containers[0]
			ok := c.Rootfs != nil && *c.Rootfs.UsedBytes >= 2<<20 && c.Logs != nil && *c.Logs.UsedBytes > 0 &&
				p.EphemeralStorage != nil && *p.EphemeralStorage.UsedBytes >= 5<<20
			return ok, fmt.Sprintf("rootfs %s, logs %s, ephemeral %s", fsUsed(c.Rootfs), fsUsed(c.Logs), fsUsed(p.EphemeralStorage))
		}
		return false, "pod disk not in the summary"
	})
	if rt := sum.Node.Runtime; rt == nil || rt.ImageFs == nil || *rt.ImageFs.UsedBytes == 0 || *rt.ImageFs.CapacityBytes == 0 {
		t.Errorf("node.runtime.imageFs: %+v", sum.Node.Runtime)
	}
	names := map[string]bool{}
	for _, c := range sum.Node.SystemContainers {
		if c.CPU != nil && *c.CPU.UsageCoreNanoSeconds > 0 && c.Memory != nil && *c.Memory.RSSBytes > 0 {
			names[c.Name] = true
		}
	}
	if !names["kubelet"] || !names["runtime"] {
		t.Errorf("system containers with CPU and memory: %v", names)
	}
}

func fsUsed(fs *statsapi.FsStats) string {
	if fs == nil || fs.UsedBytes == nil {
		return "none"
	}
	return fmt.Sprint(*fs.UsedBytes)
}
