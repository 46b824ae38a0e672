package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// twoContainerPod is a pod with a server and a sleeping sidecar whose env
// value is a parameter, so a test can change one container only.
func twoContainerPod(name, sidecarValue string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: server
    image: %s
    imagePullPolicy: IfNotPresent
  - name: sidecar
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    env:
    - name: VALUE
      value: %q
`, name, testImage, testImage, sidecarValue)
}

func TestCreateEditDelete(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("pod.yaml", twoContainerPod("editme", "one"))
	before := a.waitRunning("editme", "server", "sidecar")

	// Only the sidecar's spec changes: only it is replaced.
	a.writeManifest("pod.yaml", twoContainerPod("editme", "two"))
	var after map[string]docker.APIContainers
	waitFor(t, 30*time.Second, func() (bool, string) {
		after = a.running("editme")
		sc, ok := after["sidecar"]
		return ok && len(after) == 3 && sc.ID != before["sidecar"].ID, fmt.Sprintf("running %v", keys(after))
	})
	if after["server"].ID != before["server"].ID {
		t.Errorf("server was replaced although its spec did not change")
	}
	if after["POD"].ID != before["POD"].ID {
		t.Errorf("infra container was replaced although the ports did not change")
	}
	env := inspect(t, after["sidecar"].ID).Config.Env
	if !contains(env, "VALUE=two") {
		t.Errorf("new sidecar env = %v, want VALUE=two", env)
	}
	if got := after["sidecar"].Labels["io.kubernetes.container.restartCount"]; got != "1" {
		t.Errorf("restartCount label of replaced sidecar = %q, want 1", got)
	}

	// Deleting the file stops and removes every container of the pod.
	a.removeManifest("pod.yaml")
	waitFor(t, 30*time.Second, func() (bool, string) {
		n := len(a.containers("editme"))
		return n == 0, fmt.Sprintf("%d containers left", n)
	})
}

func TestHostPortEnvAndVolumes(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := freePort(t)
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "hello.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.writeManifest("web.json", fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "web", "namespace": "e2e"},
  "spec": {
    "containers": [{
      "name": "server", "image": %q, "imagePullPolicy": "IfNotPresent",
      "args": ["/testserver", "-listen", ":8080"],
      "ports": [{"containerPort": 8080, "hostPort": %d, "hostIP": "127.0.0.1"}],
      "env": [{"name": "GREETING", "value": "hello world"}],
      "workingDir": "/tmp",
      "volumeMounts": [
        {"name": "host", "mountPath": "/host", "readOnly": true},
        {"name": "scratch", "mountPath": "/scratch"}
      ]
    }],
    "volumes": [
      {"name": "host", "hostPath": {"path": %q}},
      {"name": "scratch", "emptyDir": {}}
    ]
  }
}`, testImage, port, hostDir))
	running := a.waitRunning("web", "server")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	waitFor(t, 20*time.Second, func() (bool, string) {
		code, body := httpGet(base + "/")
		return code == 200 && strings.HasPrefix(body, "ok web"), fmt.Sprintf("GET / = %d %q", code, body)
	})
	if code, body := httpGet(base + "/env?name=GREETING"); code != 200 || body != "hello world" {
		t.Errorf("env GREETING = %d %q, want \"hello world\"", code, body)
	}
	if code, body := httpGet(base + "/file?path=/host/hello.txt"); code != 200 || body != "from the host" {
		t.Errorf("hostPath file = %d %q", code, body)
	}
	if code, _ := httpPut(base+"/file?path=/host/new.txt", "x"); code == 200 {
		t.Errorf("write to a readOnly hostPath mount succeeded")
	}
	if code, body := httpPut(base+"/file?path=/scratch/note.txt", "kept on the node"); code != 200 {
		t.Fatalf("write to emptyDir: %d %s", code, body)
	}
	uid := running["server"].Labels["io.kubernetes.pod.uid"]
	onHost := filepath.Join(a.rootDir, "pods", uid, "volumes", "kubernetes.io~empty-dir", "scratch", "note.txt")
	if data, err := os.ReadFile(onHost); err != nil || string(data) != "kept on the node" {
		t.Errorf("emptyDir file on the host %s = %q, %v", onHost, data, err)
	}
	if wd := inspect(t, running["server"].ID).Config.WorkingDir; wd != "/tmp" {
		t.Errorf("workingDir = %q, want /tmp", wd)
	}

	// Removing the pod removes its emptyDir from the node.
	a.removeManifest("web.json")
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(a.rootDir, "pods", uid))
		return os.IsNotExist(err) && len(a.containers("web")) == 0, fmt.Sprintf("pod dir stat: %v", err)
	})
}

func TestResourcesAsComputed(t *testing.T) {
	a := startAgent(t)
	a.writeManifest("res.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: res
spec:
  containers:
  - name: limited
    image: %[1]s
    imagePullPolicy: IfNotPresent
    resources:
      requests: {cpu: 250m, memory: 32Mi}
      limits: {cpu: 500m, memory: 64Mi}
  - name: onlylimit
    image: %[1]s
    imagePullPolicy: IfNotPresent
    args: ["/testserver", "-listen", ":8081"]
    resources:
      limits: {cpu: 750m}
  - name: none
    image: %[1]s
    imagePullPolicy: IfNotPresent
    args: ["/testserver", "-listen", ":8082"]
`, testImage))
	running := a.waitRunning("res", "limited", "onlylimit", "none")
	cases := []struct {
		name                  string
		shares, quota, period int64
		memory                int64
	}{
		{"limited", 256, 50000, 100000, 64 << 20},
		{"onlylimit", 768, 75000, 100000, 0}, // the pod requests 1 CPU in all: it fits any node
		{"none", 2, 0, 0, 0},
	}
	for _, c := range cases {
		hc := inspect(t, running[c.name].ID).HostConfig
		if hc.CPUShares != c.shares || hc.CPUQuota != c.quota || hc.CPUPeriod != c.period || hc.Memory != c.memory {
			t.Errorf("%s: shares/quota/period/memory = %d/%d/%d/%d, want %d/%d/%d/%d", c.name,
				hc.CPUShares, hc.CPUQuota, hc.CPUPeriod, hc.Memory, c.shares, c.quota, c.period, c.memory)
		}
		if hc.RestartPolicy.Name != "no" {
			t.Errorf("%s: Docker restart policy %q, want no", c.name, hc.RestartPolicy.Name)
		}
		if !strings.HasPrefix(hc.NetworkMode, "container:") || !strings.HasPrefix(hc.IpcMode, "container:") {
			t.Errorf("%s: network/ipc mode %q/%q, want the infra container's", c.name, hc.NetworkMode, hc.IpcMode)
		}
	}
}

func TestBrokenFileBesideGoodOne(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("bad.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: bad
spec:
  containers:
  - name: c
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    imagee: typo
`)
	a.writeManifest("good.yaml", twoContainerPod("good", "v"))
	running := a.waitRunning("good", "server", "sidecar")
	waitFor(t, 10*time.Second, func() (bool, string) {
		log := a.log()
		return strings.Contains(log, "bad.yaml") && strings.Contains(log, "spec.containers[0].imagee"),
			"log does not name bad.yaml and the unknown field"
	})
	if n := len(a.containers("bad")); n != 0 {
		t.Errorf("broken manifest produced %d containers", n)
	}

	// Corrupting the good file keeps its last good version running.
	a.writeManifest("good.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: good\n")
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		return strings.Contains(sources, "good.yaml: document 1"), "/sources does not report the corrupted file: " + sources
	})
	a.waitRounds(3)
	now := a.running("good")
	for name, c := range running {
		if now[name].ID != c.ID {
			t.Errorf("container %s changed after its file was corrupted", name)
		}
	}
	// An empty file is "not written yet", not "no pods".
	a.writeManifest("good.yaml", "")
	waitFor(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(a.log(), "good.yaml is empty"), "the agent has not read the emptied file"
	})
	a.waitRounds(3)
	if n := len(a.running("good")); n != 3 {
		t.Errorf("after emptying the file %d containers run, want 3", n)
	}
}

func TestKill9RestartAdoptsEverything(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("pod.yaml", twoContainerPod("adopt", "x"))
	before := a.waitRunning("adopt", "server", "sidecar")

	a.stop(syscall.SIGKILL)
	a.start()
	// Evidence that the new agent had several rounds to (wrongly) act.
	a.waitRounds(4)
	all := a.containers("adopt")
	if len(all) != 3 {
		t.Errorf("after restart there are %d containers, want the same 3", len(all))
	}
	after := a.running("adopt")
	for name, c := range before {
		if after[name].ID != c.ID {
			t.Errorf("container %s was recreated by the restarted agent", name)
		}
	}
	// The restarted agent manages the pod: a change still applies.
	a.writeManifest("pod.yaml", twoContainerPod("adopt", "y"))
	waitFor(t, 30*time.Second, func() (bool, string) {
		now := a.running("adopt")
		return len(now) == 3 && now["sidecar"].ID != before["sidecar"].ID, "sidecar not replaced"
	})
}

func TestForeignContainersLeftAlone(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("pod.yaml", twoContainerPod("mine", "x"))
	a.waitRunning("mine", "server", "sidecar")

	// A container with a k8s_ name and no owner label, and one owned by
	// another node name: neither is this agent's.
	var ids []string
	for i, labels := range []map[string]string{
		nil,
		{ownerLabel: a.node + "-other", "io.kubernetes.pod.uid": "u1", "io.kubernetes.pod.name": "mine"},
	} {
		name := fmt.Sprintf("k8s_server.deadbeef_mine_default_foreign%d-%s_0000000%d", i, a.node, i)
		c, err := dockerc.CreateContainer(docker.CreateContainerOptions{
			Name:   name,
			Config: &docker.Config{Image: pauseImage, Labels: labels},
		})
		if err != nil {
			t.Fatalf("create foreign container: %v", err)
		}
		t.Cleanup(func() { _ = dockerc.RemoveContainer(docker.RemoveContainerOptions{ID: c.ID, Force: true}) })
		if err := dockerc.StartContainer(c.ID, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	a.removeManifest("pod.yaml")
	waitFor(t, 30*time.Second, func() (bool, string) {
		return len(a.containers("mine")) == 0, "own pod not removed"
	})
	a.waitRounds(3)
	for _, id := range ids {
		c := inspect(t, id)
		if !c.State.Running {
			t.Errorf("foreign container %s was stopped", c.Name)
		}
	}
}

func TestHostPortConflictFirstAdmittedWins(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := freePort(t)
	pod := func(name string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  containers:
  - name: server
    image: %s
    imagePullPolicy: IfNotPresent
    ports: [{containerPort: 8080, hostPort: %d}]
`, name, testImage, port)
	}
	a.writeManifest("first.yaml", pod("first"))
	a.waitRunning("first", "server")
	a.writeManifest("second.yaml", pod("second"))
	waitFor(t, 10*time.Second, func() (bool, string) {
		log := a.log()
		return strings.Contains(log, "default/second") && strings.Contains(log, "claimed by pod default/first"),
			"no rejection naming both pods in the log"
	})
	if n := len(a.containers("second")); n != 0 {
		t.Errorf("rejected pod has %d containers", n)
	}
	// The rejection is visible in /pods: Pending (it can clear), the
	// kubelet's reason, a message naming what holds it.
	code, body := httpGet(a.api(true) + "/pods/default/second")
	if code != 200 || !strings.Contains(body, `"phase": "Pending"`) || !strings.Contains(body, `"reason": "NodePorts"`) ||
		!strings.Contains(body, "Pod was rejected: pod default/second from source") ||
		!strings.Contains(body, "claimed by pod default/first") {
		t.Errorf("GET the rejected pod = %d %.600s", code, body)
	}
	// And an event says so.
	if code, body := httpGet(a.api(true) + "/events"); code != 200 || !strings.Contains(body, `"reason": "NodePorts"`) ||
		!strings.Contains(body, `"name": "second"`) {
		t.Errorf("GET /events = %d %.800s, want the NodePorts rejection of second", code, body)
	}
	// A POST that is rejected answers 200 and says so.
	a.waitAPI()
	code, body = request(t, "POST", a.api(false)+"/pods", pod("third"))
	if code != 200 || !strings.Contains(body, `"reason": "NodePorts"`) || !strings.Contains(body, `"pod": "default/third"`) {
		t.Errorf("POST of a conflicting pod = %d %s, want 200 with the rejection", code, body)
	}
	// After a restart the admission order holds even though "first" sorts
	// first anyway: rename so the loser would sort first.
	a.stop(syscall.SIGKILL)
	if err := os.Rename(filepath.Join(a.manifestDir, "second.yaml"), filepath.Join(a.manifestDir, "a-second.yaml")); err != nil {
		t.Fatal(err)
	}
	a.start()
	a.waitRounds(4)
	if n := len(a.running("first")); n != 2 {
		t.Errorf("after restart pod first runs %d containers, want 2", n)
	}
	if n := len(a.containers("second")); n != 0 {
		t.Errorf("after restart the rejected pod has %d containers", n)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestHostNetwork(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := freePort(t)
	a.writeManifest("hostnet.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  containers:
  - name: server
    image: %s
    imagePullPolicy: IfNotPresent
    args: ["/testserver", "-listen", "127.0.0.1:%d"]
    ports: [{containerPort: %d, hostPort: %d}]
`, testImage, port, port, port))
	running := a.waitRunning("hostnet", "server")
	if mode := inspect(t, running["POD"].ID).HostConfig.NetworkMode; mode != "host" {
		t.Errorf("infra network mode %q, want host", mode)
	}
	waitFor(t, 20*time.Second, func() (bool, string) {
		code, body := httpGet(fmt.Sprintf("http://127.0.0.1:%d/", port))
		return code == 200, fmt.Sprintf("GET = %d %q", code, body)
	})
}
