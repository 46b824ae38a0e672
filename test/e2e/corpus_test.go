package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"
)

// The corpus (testdata/corpus) is realistic manifests written for this
// project after the Kubernetes documentation's examples and kubeadm's
// static pods, the test image standing in for the real programs. Each runs
// as the kubelet would run it.
func TestCorpusOfRealManifests(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	vals := struct {
		Image, Root                                          string
		EtcdPort, SchedulerPort, APIServerPort, ExporterPort int
	}{testImage, t.TempDir(), freePort(t), freePort(t), freePort(t), freePort(t)}
	// The host's / of node-exporter: a shared mount, as / is on a systemd
	// host (this machine's / is private).
	must(t, exec.Command("mount", "--bind", vals.Root, vals.Root).Run())
	t.Cleanup(func() { unmountUnder(vals.Root) })
	must(t, exec.Command("mount", "--make-rshared", vals.Root).Run())
	// A kubeadm node has /etc/kubernetes: FileOrCreate makes the file, not
	// its directory (as the kubelet).
	must(t, os.MkdirAll(filepath.Join(vals.Root, "etc/kubernetes"), 0o755))
	files, err := filepath.Glob("testdata/corpus/*.yaml")
	must(t, err)
	if len(files) < 7 {
		t.Fatalf("corpus: %v", files)
	}
	for _, f := range files {
		tmpl, err := template.ParseFiles(f)
		must(t, err)
		var b bytes.Buffer
		must(t, tmpl.Execute(&b, vals))
		a.writeManifest(filepath.Base(f), b.String())
	}
	type podJSON struct {
		Status podStatusJSON `json:"status"`
	}
	get := func(key string) podStatusJSON {
		code, body := httpGet(a.api(true) + "/pods/" + key)
		var p podJSON
		if code == 200 {
			_ = json.Unmarshal([]byte(body), &p)
		}
		return p.Status
	}
	qos := map[string]string{
		"kube-system/etcd": "Burstable", "kube-system/kube-scheduler": "Burstable", "kube-system/kube-apiserver": "Burstable",
		"default/counter": "BestEffort", "default/kubernetes-downwardapi-volume-example": "Guaranteed",
		"default/qos-demo": "Guaranteed", "default/qos-demo-2": "Burstable", "default/qos-demo-3": "BestEffort",
		"monitoring/prometheus-node-exporter": "BestEffort",
	}
	for key, class := range qos {
		waitFor(t, 60*time.Second, func() (bool, string) {
			st := get(key)
			return st.Phase == "Running" && st.condition("Ready") == "True" && st.QOSClass == class,
				fmt.Sprintf("%s: phase %q, ready %q, qosClass %q (want Running, True, %s)", key, st.Phase, st.condition("Ready"), st.QOSClass, class)
		})
	}

	// kubeadm's hostPath types: FileOrCreate made an empty file,
	// DirectoryOrCreate directories.
	if fi, err := os.Stat(filepath.Join(vals.Root, "etc/kubernetes/scheduler.conf")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("FileOrCreate: %v %v", fi, err)
	}
	for _, d := range []string{"var/lib/etcd", "etc/kubernetes/pki/etcd", "etc/ssl/certs"} {
		if fi, err := os.Stat(filepath.Join(vals.Root, d)); err != nil || !fi.IsDir() {
			t.Errorf("DirectoryOrCreate %s: %v", d, err)
		}
	}
	// seccomp RuntimeDefault: Docker's default profile, not unconfined.
	for _, c := range a.containers("etcd") {
		if opts := inspect(t, c.ID).HostConfig.SecurityOpt; strings.Contains(strings.Join(opts, " "), "unconfined") {
			t.Errorf("etcd container %s runs with %v", c.Names, opts)
		}
	}

	// oom_score_adj as the kubelet sets it: by QoS class, node-critical
	// pods as Guaranteed, infra containers below all.
	oomAdj := func(pod, container string) string {
		for _, c := range a.containers(pod) {
			if c.Labels["io.kubernetes.container.name"] == container {
				data, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", inspect(t, c.ID).State.Pid))
				must(t, err)
				return strings.TrimSpace(string(data))
			}
		}
		return "none"
	}
	// A host that does not let processes lower their score (this test's
	// own process probes it) gets 0 instead of the negative values.
	guaranteed, infra := "-997", "-998"
	if !canLowerOOMScore(t) {
		guaranteed, infra = "0", "0"
	}
	for _, c := range []struct{ pod, container, want string }{
		{"etcd", "etcd", guaranteed}, {"qos-demo", "qos-demo-ctr", guaranteed}, {"qos-demo-3", "qos-demo-3-ctr", "1000"}, {"qos-demo", "POD", infra},
	} {
		if got := oomAdj(c.pod, c.container); got != c.want {
			t.Errorf("%s/%s: oom_score_adj %s, want %s", c.pod, c.container, got, c.want)
		}
	}
	if got, err := strconv.Atoi(oomAdj("qos-demo-2", "qos-demo-2-ctr")); err != nil || got < 3 || got > 999 {
		t.Errorf("Burstable qos-demo-2: oom_score_adj %d (%v), want between 3 and 999", got, err)
	}

	// node-exporter: its root with HostToContainer propagation, and a
	// mount made on the host after it started is seen inside.
	for _, c := range a.containers("prometheus-node-exporter") {
		if c.Labels["io.kubernetes.container.name"] != "node-exporter" {
			continue
		}
		binds := strings.Join(inspect(t, c.ID).HostConfig.Binds, " ")
		if !strings.Contains(binds, vals.Root+":/host/root:ro,rslave") {
			t.Errorf("node-exporter binds %s, want the root read-only and rslave", binds)
		}
	}
	late := filepath.Join(vals.Root, "late")
	must(t, os.MkdirAll(late, 0o755))
	must(t, exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", late).Run())
	must(t, os.WriteFile(filepath.Join(late, "seen"), []byte("yes"), 0o644))
	waitFor(t, 10*time.Second, func() (bool, string) {
		q := url.Values{"command": {"cat", "/host/root/late/seen"}}
		code, body := request(t, "POST", a.api(false)+"/exec/monitoring/prometheus-node-exporter/node-exporter?"+q.Encode(), "")
		return code == 200 && strings.Contains(body, "yes"), fmt.Sprintf("exec: %d %s", code, body)
	})

	// The logging sidecar streams the app's log file.
	waitFor(t, 20*time.Second, func() (bool, string) {
		code, body := httpGet(a.api(false) + "/containerLogs/default/counter/count-log-1?tailLines=5")
		return code == 200 && strings.Contains(body, "1: "), fmt.Sprintf("sidecar logs %d %q", code, body)
	})

	// The downward API, in env and in files.
	exec := func(cmd ...string) string {
		q := url.Values{"command": cmd}
		code, body := request(t, "POST", a.api(false)+"/exec/default/kubernetes-downwardapi-volume-example/client-container?"+q.Encode(), "")
		var r struct {
			ExitCode int    `json:"exitCode"`
			Output   string `json:"output"`
		}
		_ = json.Unmarshal([]byte(body), &r)
		if code != 200 || r.ExitCode != 0 {
			t.Errorf("exec %v: %d %s", cmd, code, body)
		}
		return r.Output
	}
	env := exec("env")
	for _, want := range []string{"MY_NODE_NAME=" + a.node, "MY_POD_NAME=kubernetes-downwardapi-volume-example", "MY_POD_NAMESPACE=default",
		"MY_POD_SERVICE_ACCOUNT=default", "MY_CPU_LIMIT=250", "MY_POD_IP=" + get("default/kubernetes-downwardapi-volume-example").PodIP} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	if labels := exec("cat", "/etc/podinfo/labels"); !strings.Contains(labels, `rack="rack-22"`) || !strings.Contains(labels, `zone="us-est-coast"`) {
		t.Errorf("labels file: %q", labels)
	}
	if ann := exec("cat", "/etc/podinfo/annotations"); !strings.Contains(ann, `builder="john-doe"`) {
		t.Errorf("annotations file: %q", ann)
	}
}

// canLowerOOMScore reports whether this host lets a process lower its
// oom_score_adj (it needs CAP_SYS_RESOURCE, which some sandboxes withhold).
func canLowerOOMScore(t *testing.T) bool {
	const path = "/proc/self/oom_score_adj"
	data, err := os.ReadFile(path)
	must(t, err)
	cur, err := strconv.Atoi(strings.TrimSpace(string(data)))
	must(t, err)
	if os.WriteFile(path, []byte(strconv.Itoa(cur-1)), 0) != nil {
		return false
	}
	must(t, os.WriteFile(path, data, 0))
	return true
}
