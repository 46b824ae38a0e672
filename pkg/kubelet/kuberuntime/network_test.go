package kuberuntime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
)

// fakeNetwork is a pod network whose plugin attaches sandboxes (mode none
// unless set), recording what it is asked.
type fakeNetwork struct {
	mu        sync.Mutex
	mode      string
	notReady  error // SandboxMode's error
	setUpErr  error
	setUps    []string // sandbox ID and pid
	tearDowns []string
}

func (n *fakeNetwork) DNS(*v1.Pod) (kubecontainer.DNSSettings, error) {
	return kubecontainer.DNSSettings{Nameservers: []string{"10.96.0.10"}}, nil
}

func (n *fakeNetwork) SandboxMode(pod *v1.Pod) (string, error) {
	if pod.Spec.HostNetwork {
		return "host", nil
	}
	return n.mode, n.notReady
}

func (n *fakeNetwork) SetUp(_ context.Context, _ *v1.Pod, id string, pid int) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setUps = append(n.setUps, id)
	if pid <= 0 {
		return "", errors.New("no pid")
	}
	if n.setUpErr != nil {
		return "", n.setUpErr
	}
	return "10.250.0.2", nil
}

func (n *fakeNetwork) TearDown(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.tearDowns = append(n.tearDowns, id)
	return nil
}

func hostPortPod() *v1.Pod {
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	return pod
}

// With a network plugin the infra container starts on network none,
// without Docker's port bindings (the plugin publishes them) and with the
// network's DNS; the plugin attaches it (its ID and process) before the
// app containers start, which see the plugin's IP; stopping it detaches
// it, and so does removing it.
func TestSyncPodCNISandbox(t *testing.T) {
	fake := containertest.NewFakeClient("img:1", "pause:1")
	m, _ := newSyncManager(t, Config{}, fake)
	net := &fakeNetwork{mode: "none"}
	m.network = net
	pod := hostPortPod()
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	if _, err := m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID)); err != nil {
		t.Fatal(err)
	}
	var infra, app kubecontainer.ContainerDetail
	for _, c := range fake.Calls() {
		if id, ok := strings.CutPrefix(c, "start "); ok {
			d, _ := fake.Container(id)
			if d.Labels[kubecontainer.LabelType] == kubecontainer.TypeSandbox {
				infra = d
			} else {
				app = d
			}
		}
	}
	if infra.ID == "" || app.ID == "" {
		t.Fatalf("calls %v: want the infra and app containers started", fake.Calls())
	}
	if got := net.setUps; !slices.Equal(got, []string{infra.ID}) {
		t.Errorf("SetUp of %v, want the infra container %s", got, infra.ID)
	}
	spec := fake.CreateSpec(infra.ID)
	if spec.NetworkMode != "none" || len(spec.Ports) != 0 || !slices.Equal(spec.DNS.Nameservers, []string{"10.96.0.10"}) {
		t.Errorf("infra spec: network %q, ports %v, DNS %v; want none, no ports, the network's DNS", spec.NetworkMode, spec.Ports, spec.DNS)
	}
	if env := fake.CreateSpec(app.ID).Env; !slices.Contains(env, "IP=10.250.0.2") {
		t.Errorf("app env %v, want the plugin's IP", env)
	}

	state := &kubecontainer.PodState{UID: pod.UID, Containers: []*kubecontainer.ContainerState{
		{ID: app.ID, Name: "a", Running: true}, {ID: infra.ID, Name: infraName, Running: true}}}
	if _, err := m.StopPod(context.Background(), pod, state, MinStopGrace); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RemovePod(context.Background(), state); err != nil {
		t.Fatal(err)
	}
	// Detached once stopped, and again (a no-op for the network) as it is
	// removed: an infra container that died by itself is only removed.
	if got := net.tearDowns; !slices.Equal(got, []string{infra.ID, infra.ID}) {
		t.Errorf("TearDown of %v, want the infra container's at its stop and its removal", got)
	}
}

// On Docker's bridge (and for host-network pods) the infra container
// publishes its host ports itself and nothing is attached.
func TestSyncPodBridgeSandbox(t *testing.T) {
	for _, hostNetwork := range []bool{false, true} {
		fake := containertest.NewFakeClient("img:1", "pause:1")
		m, _ := newSyncManager(t, Config{}, fake)
		net := &fakeNetwork{mode: ""}
		m.network = net
		pod := hostPortPod()
		pod.Spec.HostNetwork = hostNetwork
		if _, err := m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID)); err != nil {
			t.Fatal(err)
		}
		spec := fake.CreateSpec(firstCreated(t, fake))
		wantMode, wantPorts := "", 1
		if hostNetwork {
			wantMode, wantPorts = "host", 0
		}
		if spec.NetworkMode != wantMode || len(spec.Ports) != wantPorts || len(net.setUps) != 0 {
			t.Errorf("hostNetwork=%t: network %q, ports %v, SetUps %v", hostNetwork, spec.NetworkMode, spec.Ports, net.setUps)
		}
	}
}

func firstCreated(t *testing.T, fake *containertest.FakeClient) string {
	t.Helper()
	for _, c := range fake.Calls() {
		if id, ok := strings.CutPrefix(c, "start "); ok {
			return id
		}
	}
	t.Fatal("nothing started")
	return ""
}

// A network that is not ready fails the sandbox before any Docker call,
// with the network's reason, and backs off; a failed attachment removes
// the infra container it made and backs off the same way.
func TestSyncPodCNIFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		net       *fakeNetwork
		wantCalls func([]string) bool
		want      string
	}{
		{"not ready", &fakeNetwork{mode: "none", notReady: errors.New("network plugin is not ready: cni config uninitialized")},
			func(calls []string) bool { return len(calls) == 0 }, "cni config uninitialized"},
		{"ADD fails", &fakeNetwork{mode: "none", setUpErr: errors.New("plugin type=\"bridge\" failed (add): boom")},
			func(calls []string) bool {
				return slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "remove ") })
			}, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := containertest.NewFakeClient("img:1", "pause:1")
			m, clk := newSyncManager(t, Config{}, fake)
			m.network = tc.net
			pod := hostPortPod()
			t0 := clk.Now()
			r, err := m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID))
			var ce *kubecontainer.StartError
			if !errors.As(err, &ce) || ce.Reason != reasonCreateSandbox || !strings.Contains(ce.Message, tc.want) {
				t.Fatalf("error %v, want a %s naming %q", err, reasonCreateSandbox, tc.want)
			}
			if calls := fake.Calls(); !tc.wantCalls(calls) {
				t.Errorf("Docker calls %v", calls)
			}
			if left, _ := fake.List(context.Background(), kubecontainer.LabelOwner, "n"); len(left) != 0 {
				t.Errorf("%d containers left", len(left))
			}
			if !r.RetryAt.Equal(t0) {
				t.Errorf("retry at +%v, want at once after the first failure", r.RetryAt.Sub(t0))
			}
			if _, err = m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID)); err == nil {
				t.Fatal("second try succeeded")
			}
			fake.Calls()
			clk.Step(5 * time.Second)
			if r, err := m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID)); err != nil || r.Acted || len(fake.Calls()) != 0 {
				t.Errorf("in back-off: acted %v, error %v: want a wait without a Docker call", r.Acted, err)
			}
		})
	}
}
