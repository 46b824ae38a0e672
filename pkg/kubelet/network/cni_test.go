package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
)

// fakePlugin is a CNI plugin of a few lines of shell: it logs each call
// (command, container ID, netns, interface, CNI_ARGS) to calls, keeps the
// stdin of the last call of each command, answers VERSION, and ADDs the IP
// 10.9.0.5 — or fails, naming "fake failure", while the file fail exists.
const fakePlugin = `#!/bin/sh
dir=$(dirname "$0")/../state
input=$(cat)
echo "$CNI_COMMAND $CNI_CONTAINERID $CNI_NETNS $CNI_IFNAME $CNI_ARGS" >> "$dir/calls"
printf '%s' "$input" > "$dir/last-$CNI_COMMAND"
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
ADD)
  if [ -e "$dir/fail" ]; then echo '{"cniVersion":"1.0.0","code":11,"msg":"fake failure"}'; exit 1; fi
  echo '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"'"$CNI_NETNS"'"}],"ips":[{"address":"10.9.0.5/24","interface":0}]}' ;;
esac
`

type fixture struct {
	t                                                      *testing.T
	root, confDir, binDir, cacheDir, stateDir, pluginState string
	events                                                 *recordedEvents
}

type recordedEvents struct{ got []string }

func (r *recordedEvents) Event(ref events.Ref, warning bool, reason, format string, args ...any) {
	r.got = append(r.got, reason+": "+fmt.Sprintf(format, args...))
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("pinning a network namespace needs root")
	}
	root := t.TempDir()
	f := &fixture{t: t, root: root, confDir: filepath.Join(root, "net.d"), binDir: filepath.Join(root, "bin"),
		cacheDir: filepath.Join(root, "cache"), stateDir: filepath.Join(root, "network"), pluginState: filepath.Join(root, "state"),
		events: &recordedEvents{}}
	for _, d := range []string{f.confDir, f.binDir, f.pluginState} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.binDir, "fake"), []byte(fakePlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) writeConf(name, content string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.confDir, name), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

const fakeConflist = `{"cniVersion": "1.0.0", "name": "fakenet", "plugins": [
  {"type": "fake", "capabilities": {"portMappings": true, "bandwidth": true, "ipRanges": true}}]}`

func (f *fixture) manager() *Manager {
	f.t.Helper()
	m, err := New(Config{NodeName: "node-a", Plugin: PluginCNI, ConfDir: f.confDir, BinDirs: []string{"", f.binDir}, CacheDir: f.cacheDir,
		StateDir: f.stateDir, Events: f.events})
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// calls are the plugin's calls but VERSION, as "COMMAND containerID".
func (f *fixture) calls() []string {
	data, _ := os.ReadFile(filepath.Join(f.pluginState, "calls"))
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] != "VERSION" {
			out = append(out, fields[0]+" "+fields[1])
		}
	}
	return out
}

func (f *fixture) lastCall(cmd string) []string {
	data, _ := os.ReadFile(filepath.Join(f.pluginState, "calls"))
	var last []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if fields := strings.Fields(line); len(fields) > 0 && fields[0] == cmd {
			last = fields
		}
	}
	return last
}

func testPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", UID: "uid-1",
		Annotations: map[string]string{IngressBandwidthAnnotation: "10M", EgressBandwidthAnnotation: "1M"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Ports: []v1.ContainerPort{
			{ContainerPort: 8080, HostPort: 30080, Protocol: v1.ProtocolTCP},
			{ContainerPort: 53, HostPort: 30053, Protocol: v1.ProtocolUDP, HostIP: "10.0.0.1"},
			{ContainerPort: 9090}}}}}}
}

const sandbox1 = "1111111111111111111111111111111111111111111111111111111111111111"

// An ADD runs the network's plugins on the sandbox's pinned namespace with
// the kubelet's CNI args, and the capabilities the pod asks for: its host
// ports, its bandwidth annotations (burst at MaxInt32), the node's pod
// CIDRs. The sandbox's IP is the plugins' result's.
func TestSetUpArgsAndCapabilities(t *testing.T) {
	f := newFixture(t)
	f.writeConf("10-fake.conflist", fakeConflist)
	m := f.manager()
	m.SetPodCIDRs([]string{"10.9.0.0/24"})
	if mode, err := m.SandboxMode(testPod()); mode != ModeNone || err != nil {
		t.Fatalf("SandboxMode = %q, %v; want none", mode, err)
	}
	ip, err := m.SetUp(context.Background(), testPod(), sandbox1, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.TearDown(context.Background(), sandbox1) })
	if ip != "10.9.0.5" {
		t.Errorf("IP %q, want the result's 10.9.0.5", ip)
	}
	add := f.lastCall("ADD")
	netns := filepath.Join(f.stateDir, "..", "network", "netns", sandbox1)
	if len(add) < 5 || add[1] != sandbox1 || filepath.Clean(add[2]) != filepath.Clean(netns) || add[3] != "eth0" {
		t.Errorf("ADD call %q, want the sandbox's ID, its pinned namespace %s and eth0", add, netns)
	}
	if pinnedNetNS(filepath.Join(f.stateDir, "netns"), sandbox1) == "" {
		t.Errorf("the sandbox's network namespace is not pinned")
	}
	wantArgs := "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=" + sandbox1 + ";K8S_POD_UID=uid-1"
	if len(add) < 5 || add[4] != wantArgs {
		t.Errorf("CNI_ARGS %q, want %q", add[4:], wantArgs)
	}
	var stdin struct {
		RuntimeConfig map[string]json.RawMessage `json:"runtimeConfig"`
	}
	data, _ := os.ReadFile(filepath.Join(f.pluginState, "last-ADD"))
	if err := json.Unmarshal(data, &stdin); err != nil {
		t.Fatalf("ADD stdin %s: %v", data, err)
	}
	for key, want := range map[string]string{
		"portMappings": `[{"hostPort":30080,"containerPort":8080,"protocol":"tcp"},{"hostPort":30053,"containerPort":53,"protocol":"udp","hostIP":"10.0.0.1"}]`,
		"bandwidth":    `{"ingressRate":10000000,"ingressBurst":2147483647,"egressRate":1000000,"egressBurst":2147483647}`,
		"ipRanges":     `[[{"subnet":"10.9.0.0/24"}]]`,
	} {
		if got := string(stdin.RuntimeConfig[key]); got != want {
			t.Errorf("runtimeConfig.%s = %s, want %s", key, got, want)
		}
	}
}

// A DEL uses the configuration libcni cached at the ADD (the conf
// directory may have changed since), and is idempotent: a second TearDown,
// or one of a sandbox never attached (Docker's bridge, host network), runs
// no plugin. The pinned namespace and the record go with it.
func TestTearDownIdempotent(t *testing.T) {
	f := newFixture(t)
	f.writeConf("10-fake.conflist", fakeConflist)
	m := f.manager()
	if _, err := m.SetUp(context.Background(), testPod(), sandbox1, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	// The network's configuration is gone: the DEL still has the ADD's.
	if err := os.Remove(filepath.Join(f.confDir, "10-fake.conflist")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := m.TearDown(context.Background(), sandbox1); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.TearDown(context.Background(), "2222222222222222222222222222222222222222222222222222222222222222"); err != nil {
		t.Fatal(err)
	}
	if got, want := f.calls(), []string{"ADD " + sandbox1, "DEL " + sandbox1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("plugin calls %q, want %q", got, want)
	}
	if del := f.lastCall("DEL"); len(del) < 5 || del[2] != filepath.Join(f.stateDir, "netns", sandbox1) {
		t.Errorf("DEL call %q, want it in the pinned namespace", del)
	}
	if pinnedNetNS(filepath.Join(f.stateDir, "netns"), sandbox1) != "" {
		t.Errorf("the namespace is still pinned after the DEL")
	}
	if _, err := os.Stat(filepath.Join(f.stateDir, "sandboxes", sandbox1+".json")); !os.IsNotExist(err) {
		t.Errorf("the sandbox's record is left: %v", err)
	}
}

// fakeRuntime answers Inspect and List from its containers.
type fakeRuntime struct {
	kubecontainer.Runtime
	containers map[string]*kubecontainer.ContainerDetail
}

func (r *fakeRuntime) Inspect(_ context.Context, id string) (*kubecontainer.ContainerDetail, error) {
	d, ok := r.containers[id]
	if !ok {
		return nil, kubecontainer.ErrNotFound
	}
	cp := *d
	return &cp, nil
}

func (r *fakeRuntime) List(context.Context, string, string) ([]kubecontainer.Container, error) {
	var out []kubecontainer.Container
	for id, d := range r.containers {
		out = append(out, kubecontainer.Container{ID: id, Running: d.Running, Labels: d.Labels})
	}
	return out, nil
}

// A restarted agent learns a running sandbox's IP from libcni's cache of
// its ADD, without running the plugins again; the runtime it sees reports
// that IP for the sandbox, and nothing for another container.
func TestIPAfterRestart(t *testing.T) {
	f := newFixture(t)
	f.writeConf("10-fake.conflist", fakeConflist)
	if _, err := f.manager().SetUp(context.Background(), testPod(), sandbox1, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	restarted := f.manager()
	t.Cleanup(func() { _ = restarted.TearDown(context.Background(), sandbox1) })
	sandboxLabels := map[string]string{kubecontainer.LabelType: kubecontainer.TypeSandbox}
	rt := restarted.Runtime(&fakeRuntime{containers: map[string]*kubecontainer.ContainerDetail{
		sandbox1: {ID: sandbox1, Running: true, Labels: sandboxLabels},
		"app":    {ID: "app", Running: true, Labels: map[string]string{kubecontainer.LabelType: kubecontainer.TypeContainer}},
		"bridge": {ID: "bridge", Running: true, Labels: sandboxLabels, IP: "172.17.0.9"},
	}})
	for id, want := range map[string]string{sandbox1: "10.9.0.5", "app": "", "bridge": "172.17.0.9"} {
		d, err := rt.Inspect(context.Background(), id)
		if err != nil || d.IP != want {
			t.Errorf("Inspect(%s).IP = %q, %v; want %q", id, d.IP, err, want)
		}
	}
	if got := f.calls(); len(got) != 1 {
		t.Errorf("plugin calls %q, want the one ADD before the restart", got)
	}
}

// At its start the agent detaches the sandboxes it attached that no
// longer run (stopped, or removed while it was down), and those alone.
func TestRunDetachesGoneSandboxes(t *testing.T) {
	f := newFixture(t)
	f.writeConf("10-fake.conflist", fakeConflist)
	const running, gone = sandbox1, "3333333333333333333333333333333333333333333333333333333333333333"
	m := f.manager()
	for _, id := range []string{running, gone} {
		if _, err := m.SetUp(context.Background(), testPod(), id, os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	// (SetUp of gone first detached the pod's earlier sandbox: attach it
	// again, as two pods' sandboxes.)
	pod2 := testPod()
	pod2.UID = "uid-2"
	if _, err := m.SetUp(context.Background(), pod2, running, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	restarted := f.manager()
	t.Cleanup(func() { _ = restarted.TearDown(context.Background(), running) })
	before := len(f.calls())
	restarted.Run(context.Background(), &fakeRuntime{containers: map[string]*kubecontainer.ContainerDetail{
		running: {ID: running, Running: true}}})
	if got := f.calls()[before:]; fmt.Sprint(got) != fmt.Sprint([]string{"DEL " + gone}) {
		t.Errorf("calls at the start %q, want the DEL of the gone sandbox alone", got)
	}
	if ids := restarted.cni.recorded(); fmt.Sprint(ids) != fmt.Sprint([]string{running}) {
		t.Errorf("recorded sandboxes %v, want the running one", ids)
	}
}

// A failed ADD is undone (DEL, the namespace unpinned, the record gone)
// and is the sandbox's error, naming the plugin's.
func TestFailedAddUndone(t *testing.T) {
	f := newFixture(t)
	f.writeConf("10-fake.conflist", fakeConflist)
	if err := os.WriteFile(filepath.Join(f.pluginState, "fail"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m := f.manager()
	_, err := m.SetUp(context.Background(), testPod(), sandbox1, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), "fake failure") ||
		!strings.Contains(err.Error(), `networkPlugin cni failed to set up pod "web_ns1" network`) {
		t.Fatalf("error %v, want the plugin's failure as the sandbox's", err)
	}
	if got := f.calls(); fmt.Sprint(got) != fmt.Sprint([]string{"ADD " + sandbox1, "DEL " + sandbox1}) {
		t.Errorf("plugin calls %q, want the ADD undone by a DEL", got)
	}
	if len(m.cni.recorded()) != 0 || pinnedNetNS(filepath.Join(f.stateDir, "netns"), sandbox1) != "" {
		t.Errorf("record or pinned namespace left after a failed ADD")
	}
}

// The network is ready with the first valid configuration in lexical
// order; otherwise Ready and SandboxMode name the cause.
func TestNetworkReady(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // "" ready
	}{
		{"no configuration", nil, "cni config uninitialized: no networks found in"},
		{"broken JSON", map[string]string{"10-a.conflist": `{"name": `}, "error parsing configuration list"},
		{"missing plugin", map[string]string{"10-a.conflist": `{"cniVersion": "1.0.0", "name": "a", "plugins": [{"type": "absent"}]}`},
			`failed to find plugin "absent"`},
		{"a .conf without type", map[string]string{"10-a.conf": `{"cniVersion": "1.0.0", "name": "a"}`}, "missing 'type'"},
		{"an empty list", map[string]string{"10-a.conflist": `{"cniVersion": "1.0.0", "name": "a", "plugins": []}`}, "no plugins in list"},
		{"the first valid one wins", map[string]string{"10-a.conflist": `{"name": `, "20-b.conf": `{"cniVersion": "1.0.0", "name": "b", "type": "fake"}`,
			"30-c.conflist": fakeConflist}, ""},
		{"files of other names are not networks", map[string]string{"10-a.txt": fakeConflist}, "no networks found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			for name, content := range tc.files {
				f.writeConf(name, content)
			}
			m := f.manager()
			err := m.Ready()
			_, modeErr := m.SandboxMode(testPod())
			if tc.want == "" {
				if err != nil || modeErr != nil {
					t.Fatalf("Ready %v, SandboxMode %v; want ready", err, modeErr)
				}
				if list, _ := m.cni.network(); list.Name != "b" {
					t.Errorf("network %q, want b (20-b.conf, the first valid one)", list.Name)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Ready = %v, want an error naming %q", err, tc.want)
			}
			if modeErr == nil || !strings.Contains(modeErr.Error(), "network plugin is not ready: ") {
				t.Errorf("SandboxMode error %v, want the network not ready", modeErr)
			}
			hostPod := testPod()
			hostPod.Spec.HostNetwork = true
			if mode, err := m.SandboxMode(hostPod); mode != ModeHost || err != nil {
				t.Errorf("host-network pod: %q, %v; want host whatever the plugin", mode, err)
			}
		})
	}
}

// Ready sees a configuration written after the start (the next check
// reloads the changed directory).
func TestNetworkReadyAfterWrite(t *testing.T) {
	f := newFixture(t)
	m := f.manager()
	if m.Ready() == nil {
		t.Fatal("ready without a configuration")
	}
	f.writeConf("10-fake.conflist", fakeConflist)
	if err := m.Ready(); err != nil {
		t.Fatalf("not ready once the configuration is written: %v", err)
	}
}

// Without CNI the network is Docker's: nothing to attach, always ready.
func TestDockerBridge(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod()
	if mode, err := m.SandboxMode(pod); mode != ModeBridge || err != nil {
		t.Errorf("SandboxMode %q, %v; want the bridge", mode, err)
	}
	if ip, err := m.SetUp(context.Background(), pod, sandbox1, 1); ip != "" || err != nil || m.TearDown(context.Background(), sandbox1) != nil || m.Ready() != nil {
		t.Errorf("a bridge network attached or failed: %q, %v", ip, err)
	}
	rt := &fakeRuntime{}
	if m.Runtime(rt) != kubecontainer.Runtime(rt) {
		t.Errorf("the bridge network's runtime is not the runtime itself")
	}
	if _, err := New(Config{Plugin: "kubenet"}); err == nil {
		t.Errorf("an unknown plugin was accepted")
	}
}

// The reference network is written from the Node's pod CIDRs into an empty
// conf directory, never over a configuration present; a change of the
// CIDRs later is an event and changes nothing.
func TestPodCIDRs(t *testing.T) {
	f := newFixture(t)
	m := f.manager()
	m.SetPodCIDRs([]string{"10.244.1.0/24"})
	path := filepath.Join(f.confDir, ReferenceConfFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reference network not written: %v", err)
	}
	want, _ := ReferenceConf("node-a", []string{"10.244.1.0/24"})
	if string(data) != string(want) {
		t.Errorf("reference network\n%s\nwant\n%s", data, want)
	}
	m.SetPodCIDRs([]string{"10.244.1.0/24"})
	if len(f.events.got) != 0 {
		t.Errorf("events %q for unchanged CIDRs", f.events.got)
	}
	m.SetPodCIDRs([]string{"10.244.7.0/24"})
	if len(f.events.got) != 1 || !strings.HasPrefix(f.events.got[0], "PodCIDRChanged: ") || !strings.Contains(f.events.got[0], "10.244.7.0/24") {
		t.Errorf("events %q, want one PodCIDRChanged", f.events.got)
	}
	if after, _ := os.ReadFile(path); string(after) != string(data) {
		t.Errorf("the reference network changed with the CIDRs")
	}
	// A restarted agent knows the CIDRs it wrote: a change while it was
	// down is an event too.
	restarted := f.manager()
	restarted.SetPodCIDRs([]string{"10.244.9.0/24"})
	if len(f.events.got) != 2 {
		t.Errorf("events %q, want a PodCIDRChanged after the restart", f.events.got)
	}

	other := newFixture(t)
	other.writeConf("10-flannel.conflist", fakeConflist)
	other.manager().SetPodCIDRs([]string{"10.244.1.0/24"})
	if _, err := os.Stat(filepath.Join(other.confDir, ReferenceConfFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reference network written beside an existing configuration: %v", err)
	}
}

func TestReferenceConf(t *testing.T) {
	data, err := ReferenceConf("node-a", []string{"10.244.1.0/24", "fd00:10:244:1::/64"})
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Name    string           `json:"name"`
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range conf.Plugins {
		types = append(types, p["type"].(string))
	}
	if conf.Name != "classic-kubelet-node-a" || fmt.Sprint(types) != "[bridge firewall portmap bandwidth loopback]" {
		t.Errorf("network %q of %v", conf.Name, types)
	}
	br := conf.Plugins[0]
	if br["bridge"] != BridgeName("node-a") || br["isGateway"] != true || br["ipMasq"] != true || br["hairpinMode"] != true {
		t.Errorf("bridge %v", br)
	}
	ipam, _ := json.Marshal(br["ipam"])
	if want := `{"ranges":[[{"subnet":"10.244.1.0/24"}],[{"subnet":"fd00:10:244:1::/64"}]],"routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0"}],"type":"host-local"}`; string(ipam) != want {
		t.Errorf("ipam %s, want %s", ipam, want)
	}
	if a, b := BridgeName("node-a"), BridgeName("node-b"); a == b || len(a) > 15 {
		t.Errorf("bridge names %q and %q: want distinct, at most 15 characters", a, b)
	}
	if _, err := ReferenceConf("node-a", []string{"10.244.1.0"}); err == nil {
		t.Errorf("a malformed CIDR was accepted")
	}
}

func TestPodBandwidth(t *testing.T) {
	for _, tc := range []struct {
		in      map[string]string
		want    *bandwidth
		wantErr string
	}{
		{nil, nil, ""},
		{map[string]string{IngressBandwidthAnnotation: "10M"}, &bandwidth{IngressRate: 10_000_000, IngressBurst: 2147483647}, ""},
		{map[string]string{EgressBandwidthAnnotation: "1G"}, &bandwidth{EgressRate: 1_000_000_000, EgressBurst: 2147483647}, ""},
		{map[string]string{IngressBandwidthAnnotation: "10"}, nil, "unreasonably small"},
		{map[string]string{EgressBandwidthAnnotation: "2P"}, nil, "unreasonably large"},
		{map[string]string{IngressBandwidthAnnotation: "fast"}, nil, "annotation kubernetes.io/ingress-bandwidth"},
	} {
		got, err := podBandwidth(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%v: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
