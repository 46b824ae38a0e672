package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// execIn runs a command in a pod's container through the agent's API.
func (a *agent) execIn(pod, container string, cmd ...string) (int, string) {
	a.t.Helper()
	q := url.Values{"command": cmd}
	// Called as soon as Docker shows the container running: the agent must
	// not answer 404 or 409 because its periodic relist has not seen it yet.
	code, body := request(a.t, "POST", fmt.Sprintf("%s/exec/default/%s/%s?%s", a.api(false), pod, container, q.Encode()), "")
	if code != 200 {
		a.t.Fatalf("exec %v in %s/%s: %d %s", cmd, pod, container, code, body)
	}
	var res struct {
		ExitCode int    `json:"exitCode"`
		Output   string `json:"output"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		a.t.Fatal(err)
	}
	return res.ExitCode, res.Output
}

// expectConfigError waits for the container to be waiting with
// CreateContainerConfigError and a message containing want, and checks that
// no Docker container was made for it (refused: what).
func (a *agent) expectConfigError(pod, container, want, refused string) {
	a.t.Helper()
	waitFor(a.t, 20*time.Second, func() (bool, string) {
		reason, msg := a.waitingReason(pod, container)
		return reason == "CreateContainerConfigError" && strings.Contains(msg, want), fmt.Sprintf("waiting %q %q", reason, msg)
	})
	for _, c := range a.containers(pod) {
		if c.Labels["io.kubernetes.container.name"] == container {
			a.t.Errorf("a container was created for %s", refused)
		}
	}
}

func (a *agent) waitingReason(pod, container string) (string, string) {
	code, body := httpGet(a.api(true) + "/pods/default/" + pod)
	if code != 200 {
		return "", ""
	}
	var p struct {
		Status struct {
			ContainerStatuses []struct {
				Name  string `json:"name"`
				State struct {
					Waiting *struct{ Reason, Message string } `json:"waiting"`
				} `json:"state"`
			} `json:"containerStatuses"`
		} `json:"status"`
	}
	_ = json.Unmarshal([]byte(body), &p)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Waiting != nil {
			return cs.State.Waiting.Reason, cs.State.Waiting.Message
		}
	}
	return "", ""
}

const sleeper = `["sh", "-c", "exec sleep 100000"]`

func TestSecurityContext(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("sec.yaml", `apiVersion: v1
kind: Pod
metadata: {name: sec}
spec:
  terminationGracePeriodSeconds: 2
  securityContext: {runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000]}
  containers:
  - name: ids
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    tty: true
    stdin: true
  - name: readonly
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    securityContext: {runAsUser: 0, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false}
  - name: noraw
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    securityContext: {runAsUser: 0, capabilities: {drop: [NET_RAW]}}
  - name: raw
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    securityContext: {runAsUser: 0}
`)
	running := a.waitRunning("sec", "ids", "readonly", "noraw", "raw")
	if cfg := inspect(t, running["ids"].ID).Config; !cfg.Tty || !cfg.OpenStdin {
		t.Errorf("tty/stdin not set: %v %v", cfg.Tty, cfg.OpenStdin)
	}
	for cmd, want := range map[string]string{"id -u": "1000", "id -g": "3000"} {
		if _, out := a.execIn("sec", "ids", "sh", "-c", cmd); strings.TrimSpace(out) != want {
			t.Errorf("%s = %q, want %s", cmd, out, want)
		}
	}
	if _, out := a.execIn("sec", "ids", "id", "-G"); !strings.Contains(out, "4000") {
		t.Errorf("id -G = %q, want the supplemental group 4000", out)
	}
	if code, _ := a.execIn("sec", "readonly", "touch", "/written"); code == 0 {
		t.Error("wrote to a read-only root file system")
	}
	if code, _ := a.execIn("sec", "readonly", "touch", "/tmp/x"); code == 0 {
		t.Error("/tmp of a read-only root is writable (it is part of the root here)")
	}
	if _, out := a.execIn("sec", "readonly", "grep", "NoNewPrivs", "/proc/self/status"); !strings.Contains(out, "1") {
		t.Errorf("allowPrivilegeEscalation false: %q", out)
	}
	if code, out := a.execIn("sec", "raw", "ping", "-c", "1", "-W", "2", "127.0.0.1"); code != 0 {
		t.Errorf("ping with NET_RAW failed: %s", out)
	}
	if code, _ := a.execIn("sec", "noraw", "ping", "-c", "1", "-W", "2", "127.0.0.1"); code == 0 {
		t.Error("ping worked with NET_RAW dropped")
	}

	a.writeManifest("nonroot.yaml", `apiVersion: v1
kind: Pod
metadata: {name: nonroot}
spec:
  securityContext: {runAsNonRoot: true}
  containers:
  - name: c
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
`)
	a.expectConfigError("nonroot", "c", "root", "a runAsNonRoot pod whose image runs as root")
}

func TestDownwardEnvAndExpansion(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("down.yaml", `apiVersion: v1
kind: Pod
metadata: {name: down, labels: {app: shop}, annotations: {owner: team-a}}
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: info
    downwardAPI:
      items:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
      - {path: name, fieldRef: {fieldPath: metadata.name}}
      - {path: mem, resourceFieldRef: {containerName: c, resource: limits.memory, divisor: 1Mi}}
  containers:
  - name: c
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "printf '%s\\n' '$(GREETING)' > /tmp/greeting; exec sleep 100000"]
    resources: {requests: {cpu: 250m}, limits: {cpu: 500m, memory: 64Mi}}
    volumeMounts: [{name: info, mountPath: /etc/podinfo}]
    env:
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: POD_NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    - {name: POD_UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
    - {name: APP, valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}}
    - {name: OWNER, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['owner']"}}}
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: CPU_REQ_M, valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 1m}}}
    - {name: MEM_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}
    - {name: GREETING, value: "hello $(POD_NAME) in $(POD_NS), $$(literal)"}
`)
	running := a.waitRunning("down", "c")
	_, env := a.execIn("down", "c", "env")
	uid := running["c"].Labels["io.kubernetes.pod.uid"]
	ip := inspect(t, running["POD"].ID).NetworkSettings.IPAddress
	for _, want := range []string{"POD_NAME=down", "POD_NS=default", "POD_UID=" + uid, "APP=shop", "OWNER=team-a",
		"NODE=" + a.node, "POD_IP=" + ip, "CPU_REQ_M=250", "MEM_LIMIT=67108864", "GREETING=hello down in default, $(literal)"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	if _, out := a.execIn("down", "c", "cat", "/tmp/greeting"); out != "hello down in default, $(literal)\n" {
		t.Errorf("$(VAR) in command: %q", out)
	}
	for file, want := range map[string]string{"labels": `app="shop"`, "name": "down", "mem": "64"} {
		if _, out := a.execIn("down", "c", "cat", "/etc/podinfo/"+file); out != want {
			t.Errorf("downwardAPI file %s = %q, want %q", file, out, want)
		}
	}
}

func TestHostnameAndDNS(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--cluster-domain", "example.test")
	a.writeManifest("dns.yaml", `apiVersion: v1
kind: Pod
metadata: {name: dns}
spec:
  terminationGracePeriodSeconds: 2
  hostname: web-1
  subdomain: shop
  hostAliases: [{ip: 10.9.8.7, hostnames: [db.internal, cache.internal]}]
  dnsPolicy: None
  dnsConfig:
    nameservers: [192.0.2.53]
    searches: [svc.example.test]
    options: [{name: ndots, value: "2"}]
  containers:
  - name: c
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
`)
	a.waitRunning("dns", "c")
	if _, out := a.execIn("dns", "c", "hostname"); strings.TrimSpace(out) != "web-1" {
		t.Errorf("hostname = %q", out)
	}
	if _, out := a.execIn("dns", "c", "cat", "/etc/hosts"); !strings.Contains(out, "10.9.8.7") || !strings.Contains(out, "db.internal") ||
		!strings.Contains(out, "web-1.shop.default.svc.example.test") {
		t.Errorf("/etc/hosts:\n%s", out)
	}
	_, out := a.execIn("dns", "c", "cat", "/etc/resolv.conf")
	for _, want := range []string{"nameserver 192.0.2.53", "search svc.example.test", "ndots:2"} {
		if !strings.Contains(out, want) {
			t.Errorf("/etc/resolv.conf lacks %q:\n%s", want, out)
		}
	}
}

// Every container of a pod gets the pod's hosts file: under hostNetwork the
// node's /etc/hosts plus the hostAliases (kube-vip's static pods carry
// kubernetes → 127.0.0.1; before, they were dropped), on the pod network
// the pod's IP and hostname plus the aliases; a container that mounts its
// own /etc/hosts keeps it.
func TestHostsFile(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	node, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(own, []byte("10.1.1.1 own.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.writeManifest("hosts-hnet.yaml", lifecyclePod("hosts-hnet", "Always", `  hostNetwork: true
  hostAliases: [{ip: 127.0.0.1, hostnames: [kubernetes]}, {ip: 10.9.8.7, hostnames: [db.internal, cache.internal]}]
  volumes: [{name: own, hostPath: {path: `+own+`, type: File}}]
  containers:
  - {name: c, image: `+testImage+`, command: `+sleeper+`}
  - {name: d, image: `+testImage+`, command: `+sleeper+`}
  - name: own
    image: `+testImage+`
    command: `+sleeper+`
    volumeMounts: [{name: own, mountPath: /etc/hosts}]
`))
	a.writeManifest("hosts-pnet.yaml", lifecyclePod("hosts-pnet", "Always", `  hostname: web-2
  hostAliases: [{ip: 10.9.8.7, hostnames: [db.internal]}]
  containers:
  - {name: c, image: `+testImage+`, command: `+sleeper+`}
`))
	a.waitRunning("hosts-hnet", "c", "d", "own")
	want := "# Kubernetes-managed hosts file (host network).\n" + string(node) +
		"\n# Entries added by HostAliases.\n127.0.0.1\tkubernetes\n10.9.8.7\tdb.internal\tcache.internal\n"
	for _, c := range []string{"c", "d"} {
		if _, out := a.execIn("hosts-hnet", c, "cat", "/etc/hosts"); out != want {
			t.Errorf("hostNetwork pod, container %s: /etc/hosts\n%s\nwant\n%s", c, out, want)
		}
	}
	if _, out := a.execIn("hosts-hnet", "own", "cat", "/etc/hosts"); out != "10.1.1.1 own.test\n" {
		t.Errorf("a container mounting its own /etc/hosts sees\n%s", out)
	}

	running := a.waitRunning("hosts-pnet", "c")
	ip := inspect(t, running["POD"].ID).NetworkSettings.IPAddress
	_, out := a.execIn("hosts-pnet", "c", "cat", "/etc/hosts")
	for _, line := range []string{"# Kubernetes-managed hosts file.\n", "\n127.0.0.1\tlocalhost\n", "\n" + ip + "\tweb-2\n",
		"\n# Entries added by HostAliases.\n10.9.8.7\tdb.internal\n"} {
		if !strings.Contains(out, line) {
			t.Errorf("pod network: /etc/hosts lacks %q:\n%s", line, out)
		}
	}
}

// A line break in dnsConfig would inject lines (a nameserver) into the
// resolv.conf Docker writes: such manifests are refused naming the field, as
// the API server refuses them, and the directory's other pods run.
func TestDNSConfigInjectionRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("fine.yaml", lifecyclePod("fine", "Always", `  dnsConfig: {searches: [fine.example.test]}
  containers:
  - {name: c, image: `+testImage+`, command: `+sleeper+`}
`))
	a.writeManifest("search.yaml", lifecyclePod("search", "Always", `  dnsConfig: {searches: ["example.test\nnameserver 6.6.6.6"]}
  containers:
  - {name: c, image: `+testImage+`, command: `+sleeper+`}
`))
	a.writeManifest("option.yaml", lifecyclePod("option", "Always", `  dnsConfig: {options: [{name: "ndots:1\nnameserver 6.6.6.6"}]}
  containers:
  - {name: c, image: `+testImage+`, command: `+sleeper+`}
`))
	a.waitRunning("fine", "c")
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		ok := strings.Contains(sources, `spec.dnsConfig.searches[0]: Invalid value: \"example.test\\nnameserver 6.6.6.6\"`) &&
			strings.Contains(sources, `spec.dnsConfig.options[0].name: Invalid value: \"ndots:1\\nnameserver 6.6.6.6\": must not contain whitespace or control characters`)
		return ok, "/sources: " + sources
	})
	for _, pod := range []string{"search", "option"} {
		if n := len(a.containers(pod)); n != 0 {
			t.Errorf("refused pod %s got %d containers", pod, n)
		}
	}
	if _, out := a.execIn("fine", "c", "cat", "/etc/resolv.conf"); !strings.Contains(out, "fine.example.test") {
		t.Errorf("/etc/resolv.conf of the valid pod:\n%s", out)
	}
}

func TestMemoryEmptyDirShared(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("mem.yaml", `apiVersion: v1
kind: Pod
metadata: {name: mem}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: cache, emptyDir: {medium: Memory, sizeLimit: 16Mi}}]
  containers:
  - name: writer
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo shared > /cache/note; exec sleep 100000"]
    volumeMounts: [{name: cache, mountPath: /cache}]
  - name: reader
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    volumeMounts: [{name: cache, mountPath: /cache, readOnly: true}]
`)
	running := a.waitRunning("mem", "writer", "reader")
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, out := a.execIn("mem", "reader", "cat", "/cache/note")
		return out == "shared\n", fmt.Sprintf("reader sees %q", out)
	})
	if _, out := a.execIn("mem", "reader", "sh", "-c", "grep ' /cache ' /proc/mounts"); !strings.HasPrefix(out, "tmpfs ") || !strings.Contains(out, "size=16384k") {
		t.Errorf("/cache mount: %q, want a 16Mi tmpfs", out)
	}
	podDir := filepath.Join(a.rootDir, "pods", running["writer"].Labels["io.kubernetes.pod.uid"])
	a.removeManifest("mem.yaml")
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, err := os.Stat(podDir)
		return os.IsNotExist(err), "pod directory (and its tmpfs) not removed"
	})
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), podDir) {
		t.Error("the tmpfs is still mounted after the pod went")
	}
}

func TestSubPathIsResolvedSafely(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	vol := t.TempDir()
	os.MkdirAll(filepath.Join(vol, "conf"), 0o755)
	os.WriteFile(filepath.Join(vol, "conf", "app.ini"), []byte("[app]\nok=1\n"), 0o644)
	os.Symlink("/etc", filepath.Join(vol, "evil"))
	pod := func(name, sub string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: v, hostPath: {path: %s}}]
  containers:
  - name: c
    image: %s
    imagePullPolicy: IfNotPresent
    command: %s
    env: [{name: DIR, value: conf}]
    volumeMounts: [{name: v, mountPath: /mnt/sub, %s}]
`, name, vol, testImage, sleeper, sub)
	}
	a.writeManifest("good.yaml", pod("good", "subPathExpr: $(DIR)"))
	a.writeManifest("evil.yaml", pod("evil", "subPath: evil"))
	a.waitRunning("good", "c")
	if _, out := a.execIn("good", "c", "cat", "/mnt/sub/app.ini"); out != "[app]\nok=1\n" {
		t.Errorf("subPathExpr file: %q", out)
	}
	a.expectConfigError("evil", "c", "not within volume path", "a subPath through a symlink leading out of the volume")
}

func TestTerminationMessages(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("msg.yaml", `apiVersion: v1
kind: Pod
metadata: {name: msg}
spec:
  restartPolicy: Never
  containers:
  - name: file
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo -n 'disk full' > /dev/termination-log; exit 3"]
  - name: custom
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    terminationMessagePath: /tmp/why
    command: ["sh", "-c", "echo -n done > /tmp/why"]
  - name: logs
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "echo boom from the logs; exit 1"]
`)
	want := map[string]string{"file": "disk full", "custom": "done", "logs": "boom from the logs\n"}
	waitFor(t, 30*time.Second, func() (bool, string) {
		code, body := httpGet(a.api(true) + "/pods/default/msg")
		if code != 200 {
			return false, body
		}
		var p struct {
			Status struct {
				ContainerStatuses []struct {
					Name  string `json:"name"`
					State struct {
						Terminated *struct{ Message string } `json:"terminated"`
					} `json:"state"`
				} `json:"containerStatuses"`
			} `json:"status"`
		}
		_ = json.Unmarshal([]byte(body), &p)
		got := 0
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated != nil && cs.State.Terminated.Message == want[cs.Name] {
				got++
			}
		}
		return got == 3, body
	})
}

// seccompProfile as kubeadm's static pods and the documentation's examples
// use it: RuntimeDefault at pod level runs (it was refused, and with it
// kubeadm's etcd); Unconfined reaches Docker; a Localhost profile is
// enforced (mkdir denied); a missing profile waits with
// CreateContainerError naming the file.
func TestSeccompProfiles(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	if err := os.MkdirAll(filepath.Join(a.rootDir, "seccomp", "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	deny := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`
	if err := os.WriteFile(filepath.Join(a.rootDir, "seccomp", "profiles", "no-mkdir.json"), []byte(deny), 0o644); err != nil {
		t.Fatal(err)
	}
	a.writeManifest("seccomp.yaml", lifecyclePod("seccomp", "Always", `  securityContext:
    seccompProfile: {type: RuntimeDefault}
  containers:
  - {name: dflt, image: `+testImage+`, command: `+sleeper+`}
  - name: open
    image: `+testImage+`
    command: `+sleeper+`
    securityContext: {seccompProfile: {type: Unconfined}}
  - name: local
    image: `+testImage+`
    command: `+sleeper+`
    securityContext: {seccompProfile: {type: Localhost, localhostProfile: profiles/no-mkdir.json}}
`))
	running := a.waitRunning("seccomp", "dflt", "open", "local")
	opts := func(name string) string {
		return strings.Join(inspect(t, running[name].ID).HostConfig.SecurityOpt, " ")
	}
	if o := opts("dflt"); strings.Contains(o, "seccomp") {
		t.Errorf("RuntimeDefault container security options %q, want Docker's default (none)", o)
	}
	if o := opts("open"); !strings.Contains(o, "seccomp=unconfined") {
		t.Errorf("Unconfined container security options %q", o)
	}
	if code, out := a.execIn("seccomp", "local", "mkdir", "/tmp/x"); code == 0 || !strings.Contains(out, "not permitted") {
		t.Errorf("mkdir under the Localhost profile: exit %d %q, want it denied", code, out)
	}
	if code, _ := a.execIn("seccomp", "dflt", "mkdir", "/tmp/x"); code != 0 {
		t.Errorf("mkdir under RuntimeDefault failed (exit %d)", code)
	}

	a.writeManifest("missing.yaml", lifecyclePod("missing", "Always", `  containers:
  - name: app
    image: `+testImage+`
    command: `+sleeper+`
    securityContext: {seccompProfile: {type: Localhost, localhostProfile: absent.json}}
`))
	waitFor(t, 20*time.Second, func() (bool, string) {
		reason, msg := a.waitingReason("missing", "app")
		return reason == "CreateContainerError" && strings.Contains(msg, "seccomp/absent.json"), fmt.Sprintf("waiting %q %q", reason, msg)
	})
}

// shareProcessNamespace: the containers see each other's processes, the
// pause program is PID 1, and an orphaned process is reaped.
func TestShareProcessNamespace(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("shared.yaml", lifecyclePod("shared", "Always", `  shareProcessNamespace: true
  containers:
  - {name: one, image: `+testImage+`, command: ["sh", "-c", "exec sleep 100001"]}
  - {name: two, image: `+testImage+`, command: ["sh", "-c", "exec sleep 100002"]}
`))
	a.waitRunning("shared", "one", "two")
	_, out := a.execIn("shared", "two", "ps", "-o", "pid,stat,args")
	if !strings.Contains(out, "sleep 100001") {
		t.Errorf("container two does not see container one's process:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^\s*1 \S+\s+/pause`).MatchString(out) {
		t.Errorf("PID 1 is not the pause program:\n%s", out)
	}
	// A child whose parent exits is reparented to PID 1, which must reap it.
	a.execIn("shared", "one", "sh", "-c", "(sleep 0.2 &) ; exit 0")
	// Gone for good: neither running nor left a zombie (shown as Z).
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, out := a.execIn("shared", "two", "ps", "-o", "pid,stat,args")
		zombie := regexp.MustCompile(`(?m)^\s*\d+ Z`).MatchString(out)
		return !zombie && !strings.Contains(out, "sleep 0.2"), "the orphan is not reaped:\n" + out
	})
}

// The downward API as upstream validation allows it: env from
// spec.serviceAccountName, status.podIPs and status.hostIPs, ephemeral-storage
// (an unset limit is the node's allocatable, rounded up to the divisor); in
// a volume spec.nodeName is refused.
func TestDownwardAPIAsUpstream(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("dw.yaml", lifecyclePod("dw", "Always", `  serviceAccountName: builder
  containers:
  - name: app
    image: `+testImage+`
    command: `+sleeper+`
    resources: {requests: {ephemeral-storage: 1Gi}}
    env:
    - {name: SA, valueFrom: {fieldRef: {fieldPath: spec.serviceAccountName}}}
    - {name: PODIPS, valueFrom: {fieldRef: {fieldPath: status.podIPs}}}
    - {name: HOSTIPS, valueFrom: {fieldRef: {fieldPath: status.hostIPs}}}
    - {name: EPH_REQ_MI, valueFrom: {resourceFieldRef: {resource: requests.ephemeral-storage, divisor: 1Mi}}}
    - {name: EPH_LIM, valueFrom: {resourceFieldRef: {resource: limits.ephemeral-storage, divisor: 1Gi}}}
`))
	a.waitRunning("dw", "app")
	_, out := a.execIn("dw", "app", "sh", "-c", `echo "$SA|$PODIPS|$HOSTIPS|$EPH_REQ_MI|$EPH_LIM"`)
	parts := strings.Split(strings.TrimSpace(out), "|")
	if len(parts) != 5 || parts[0] != "builder" || parts[1] == "" || parts[2] == "" || parts[3] != "1024" || parts[4] == "0" || parts[4] == "" {
		t.Errorf("downward env %q, want builder|<pod IP>|<host IP>|1024|<node storage in Gi>", out)
	}
	a.writeManifest("dwvol.yaml", lifecyclePod("dwvol", "Always", `  containers:
  - {name: app, image: `+testImage+`, volumeMounts: [{name: info, mountPath: /info}]}
  volumes:
  - name: info
    downwardAPI: {items: [{path: node, fieldRef: {fieldPath: spec.nodeName}}]}
`))
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		return strings.Contains(sources, "fieldRef.fieldPath: Unsupported value: \\\"spec.nodeName\\\""), "/sources: " + sources
	})
}

// AppArmor on a host without it (this machine): a pod asking for a profile
// other than Unconfined, by field or by the beta annotation, is rejected
// as the kubelet does — Failed, reason AppArmor, no containers — instead of
// running unconfined while saying otherwise; Unconfined runs.
func TestAppArmorRejectedWithoutHostSupport(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/sys/module/apparmor/parameters/enabled"); err == nil {
		t.Skip("this host has AppArmor: the rejection path does not apply (the options are unit-tested)")
	}
	a := startAgent(t)
	a.writeManifest("aa.yaml", lifecyclePod("aa-field", "Always", `  securityContext:
    appArmorProfile: {type: RuntimeDefault}
  containers:
  - {name: app, image: `+testImage+`, command: `+sleeper+`}
`))
	a.writeManifest("ab.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: aa-annotation
  annotations: {container.apparmor.security.beta.kubernetes.io/app: runtime/default}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - {name: app, image: `+testImage+`, command: `+sleeper+`}
`)
	a.writeManifest("ac.yaml", lifecyclePod("aa-unconfined", "Always", `  containers:
  - name: app
    image: `+testImage+`
    command: `+sleeper+`
    securityContext: {appArmorProfile: {type: Unconfined}}
`))
	a.waitRunning("aa-unconfined", "app")
	for _, pod := range []string{"aa-field", "aa-annotation"} {
		waitFor(t, 10*time.Second, func() (bool, string) {
			code, body := httpGet(a.api(true) + "/pods/default/" + pod)
			ok := code == 200 && strings.Contains(body, `"phase": "Failed"`) && strings.Contains(body, `"reason": "AppArmor"`) &&
				strings.Contains(body, "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host")
			return ok, fmt.Sprintf("GET %s: %d %.400s", pod, code, body)
		})
		if n := len(a.containers(pod)); n != 0 {
			t.Errorf("rejected pod %s has %d containers", pod, n)
		}
	}
}

// supplementalGroupsPolicy: Merge runs (Docker's behaviour); Strict cannot
// be honoured by Docker and is rejected with the kubelet's reason.
func TestSupplementalGroupsPolicy(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	for _, policy := range []string{"Merge", "Strict"} {
		a.writeManifest(strings.ToLower(policy)+".yaml", lifecyclePod("sgp-"+strings.ToLower(policy), "Always", `  securityContext: {supplementalGroups: [4242], supplementalGroupsPolicy: `+policy+`}
  containers:
  - {name: app, image: `+testImage+`, command: `+sleeper+`}
`))
	}
	a.waitRunning("sgp-merge", "app")
	if _, out := a.execIn("sgp-merge", "app", "id", "-G"); !strings.Contains(out, "4242") {
		t.Errorf("groups %q lack the supplemental group", out)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, body := httpGet(a.api(true) + "/pods/default/sgp-strict")
		return strings.Contains(body, `"reason": "SupplementalGroupsPolicyNotSupported"`) && strings.Contains(body, `"phase": "Failed"`), body
	})
	if n := len(a.containers("sgp-strict")); n != 0 {
		t.Errorf("the rejected pod has %d containers", n)
	}
}

// fsGroup: emptyDir and downwardAPI volumes are the group's at setup
// (setgid directories, so what a container writes is the group's too; a
// downwardAPI file only group-readable, as that volume is read-only), the
// group is in every container's groups, and a hostPath is left alone.
func TestFSGroup(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	host := t.TempDir()
	a.writeManifest("fsg.yaml", lifecyclePod("fsg", "Always", `  securityContext: {fsGroup: 4321, runAsUser: 1000, fsGroupChangePolicy: OnRootMismatch}
  volumes:
  - {name: scratch, emptyDir: {}}
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 8Mi}}
  - {name: info, downwardAPI: {items: [{path: sub/name, fieldRef: {fieldPath: metadata.name}}]}}
  - {name: host, hostPath: {path: `+host+`}}
  containers:
  - name: app
    image: `+testImage+`
    command: `+sleeper+`
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
    - {name: mem, mountPath: /mem}
    - {name: info, mountPath: /info}
    - {name: host, mountPath: /host}
`))
	a.waitRunning("fsg", "app")
	if _, out := a.execIn("fsg", "app", "id", "-G"); !strings.Contains(out, "4321") {
		t.Errorf("groups %q lack the fsGroup", out)
	}
	_, out := a.execIn("fsg", "app", "sh", "-c", "touch /scratch/f /mem/f && stat -c '%n %g %A' /scratch /scratch/f /mem /mem/f /info/sub/name")
	for _, want := range []string{"/scratch 4321 drwxrwsrwx", "/scratch/f 4321", "/mem 4321 drwxrwsrwt", "/mem/f 4321", "/info/sub/name 4321 -rw-r--r--"} {
		if !strings.Contains(out, want) {
			t.Errorf("volumes: %q lacks %q", out, want)
		}
	}
	if fi, err := os.Stat(host); err != nil || fi.Sys().(*syscall.Stat_t).Gid == 4321 {
		t.Errorf("the hostPath's group was changed")
	}
}

// Safe sysctls (and unsafe ones the node allows) are set in the pod's
// namespaces; any other rejects the pod (SysctlForbidden), as the kubelet.
func TestSysctls(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--allowed-unsafe-sysctls", "kernel.msg*")
	a.writeManifest("safe.yaml", lifecyclePod("safe", "Always", `  securityContext:
    sysctls:
    - {name: net.ipv4.ip_local_port_range, value: "32000 33000"}
    - {name: kernel.msgmax, value: "12345"}
  containers:
  - {name: app, image: `+testImage+`, command: `+sleeper+`}
`))
	a.writeManifest("unsafe.yaml", lifecyclePod("unsafe", "Always", `  securityContext:
    sysctls: [{name: net.core.somaxconn, value: "1024"}]
  containers:
  - {name: app, image: `+testImage+`, command: `+sleeper+`}
`))
	a.waitRunning("safe", "app")
	for file, want := range map[string]string{"/proc/sys/net/ipv4/ip_local_port_range": "32000\t33000", "/proc/sys/kernel/msgmax": "12345"} {
		if code, out := a.execIn("safe", "app", "cat", file); code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("%s in the app container: %d %q, want %q", file, code, out, want)
		}
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := a.status("unsafe")
		return st.Phase == "Failed" && st.Reason == "SysctlForbidden" && strings.Contains(st.Message, `"net.core.somaxconn" not allowlisted`),
			fmt.Sprintf("phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
	})
	if n := len(a.containers("unsafe")); n != 0 {
		t.Errorf("rejected pod has %d containers", n)
	}
}

// setHostnameAsFQDN makes the hostname the pod's FQDN; hostnameOverride
// replaces it whole.
func TestHostnameFQDNAndOverride(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--cluster-domain", "example.test")
	a.writeManifest("fqdn.yaml", lifecyclePod("fqdn", "Always", `  hostname: web
  subdomain: sub
  setHostnameAsFQDN: true
  containers:
  - {name: app, image: `+testImage+`, command: `+sleeper+`}
`))
	a.writeManifest("over.yaml", lifecyclePod("over", "Always", `  hostname: ignored
  hostnameOverride: chosen.name
  containers:
  - {name: app, image: `+testImage+`, command: `+sleeper+`}
`))
	a.waitRunning("fqdn", "app")
	a.waitRunning("over", "app")
	for pod, want := range map[string]string{"fqdn": "web.sub.default.svc.example.test", "over": "chosen.name"} {
		if code, out := a.execIn(pod, "app", "hostname"); code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("pod %s: hostname %d %q, want %q", pod, code, out, want)
		}
	}
	if code, out := a.execIn("over", "app", "cat", "/etc/hosts"); code != 0 || !strings.Contains(out, "chosen.name") {
		t.Errorf("pod over: /etc/hosts %d %q lacks the override", code, out)
	}
}
