package kuberuntime

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// actionCase is one case of testdata/pod_actions/*.yaml: a pod, its
// containers as the relist saw them and the back-off's record, and the
// actions computePodActions must decide. Times are offsets from the case's
// start T0; the containers were created a second apart from T0+1s, in the
// order listed (oldest first), and a dead one ran for a second.
type actionCase struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations"` // the pod's
	Pod         v1.PodSpec        `json:"pod"`
	// Containers are "<name> <running|exited [code]|created [code]>
	// [options]", oldest first; options: id=<id> (default <name>-<n>, n
	// its place from 1), hash=<hash> (default the spec's), restarts=<n>,
	// ran=<duration> (how long it ran before it exited), liveness or
	// startup (it failed that probe), unstarted (it has not passed its
	// startup probe). created: Docker made it but could not start it.
	Containers []string `json:"containers"`
	// BackOff are "<name> <restarted|failed|created> [@<offset>]", applied
	// in order at T0 (or the offset) to the back-off key of the container's
	// spec (POD: the sandbox's).
	BackOff []string `json:"backoff"`
	// PullBackOff is the containers whose image is in pull back-off, and
	// until when.
	PullBackOff map[string]string `json:"pullBackOff"`
	// Now is when the sync runs (default 1h).
	Now string `json:"now"`
	// Want is the actions, one a line, as describeActions writes them;
	// "finished": the pod is finished (kubecontainer.PodFinished), so its
	// worker terminates it and the runtime manager never syncs it.
	Want string `json:"want"`
}

// TestPodActionsData runs the cases of testdata/pod_actions, one file per
// phase of computePodActions.
func TestPodActionsData(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "pod_actions", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var cases []actionCase
		if err := yaml.UnmarshalStrict(data, &cases); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, c := range cases {
			t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml")+"/"+c.Name, func(t *testing.T) { c.run(t) })
		}
	}
}

func (c *actionCase) run(t *testing.T) {
	t0 := time.Now().Add(-24 * time.Hour)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid1", Annotations: c.Annotations}, Spec: c.Pod}
	state, checks := c.state(t, pod, t0)
	bo := newBackoff(10*time.Second, 40*time.Second, clock.RealClock{})
	for _, op := range c.BackOff {
		f := strings.Fields(op)
		at := t0
		if len(f) == 3 {
			at = t0.Add(offset(t, strings.TrimPrefix(f[2], "@")))
		}
		key := backoffKey(f[0], specHash(t, pod, f[0]))
		switch f[1] {
		case "restarted":
			bo.restarted(key, at)
		case "failed":
			bo.failed(key, at)
		case "created":
			bo.created(key)
		default:
			t.Fatalf("back-off %q", op)
		}
	}
	now := t0.Add(time.Hour)
	if c.Now != "" {
		now = t0.Add(offset(t, c.Now))
	}
	want := strings.TrimSpace(c.Want)
	if finished := kubecontainer.PodFinished(pod, state); finished != (want == "finished") {
		t.Fatalf("finished %v, want %v: a finished pod is terminated by its worker, never synced", finished, !finished)
	}
	if want == "finished" {
		return
	}
	a := computePodActions(pod, state, now, bo, checks)
	got := describeActions(pod, a, t0)
	if got != want {
		t.Errorf("actions:\n%s\nwant:\n%s", indent(got), indent(want))
	}
}

// state builds the case's containers and the probes' answers for them.
func (c *actionCase) state(t *testing.T, pod *v1.Pod, t0 time.Time) (*kubecontainer.PodState, podChecks) {
	probes, unstarted := map[string]string{}, map[string]bool{}
	var cs []*kubecontainer.ContainerState
	for i, line := range c.Containers {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("container %q", line)
		}
		created := t0.Add(time.Duration(i+1) * time.Second)
		s := &kubecontainer.ContainerState{ID: f[0] + "-" + strconv.Itoa(i+1), Name: f[0], Hash: specHash(t, pod, f[0]),
			Running: f[1] == "running", Status: f[1], CreatedAt: created, StartedAt: created, FinishedAt: created.Add(time.Second)}
		if s.Running {
			s.FinishedAt = time.Time{}
		}
		if f[1] == "created" {
			s.StartedAt, s.FinishedAt = time.Time{}, time.Time{}
		}
		for _, opt := range f[2:] {
			key, val, _ := strings.Cut(opt, "=")
			var err error
			switch key {
			case "id":
				s.ID = val
			case "hash":
				s.Hash = val
			case "restarts":
				s.RestartCount, err = strconv.Atoi(val)
			case "ran":
				s.StartedAt = s.FinishedAt.Add(-offset(t, val))
			case "liveness", "startup":
				probes[s.ID] = key
			case "unstarted":
				unstarted[s.ID] = true
			default:
				s.ExitCode, err = strconv.Atoi(key)
			}
			if err != nil {
				t.Fatalf("container %q: %v", line, err)
			}
		}
		cs = append(cs, s)
	}
	checks := podChecks{
		unhealthy: func(id string) (bool, string) { p, ok := probes[id]; return ok, p },
		started:   func(_ *v1.Container, id string) bool { return !unstarted[id] },
		pullBackOff: func(ctr *v1.Container) (time.Time, *kubecontainer.StartError) {
			if until, ok := c.PullBackOff[ctr.Name]; ok {
				return t0.Add(offset(t, until)), &kubecontainer.StartError{Reason: kubecontainer.ReasonImagePullBackOff}
			}
			return time.Time{}, nil
		},
	}
	if len(cs) == 0 {
		return nil, checks
	}
	state := &kubecontainer.PodState{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, Containers: cs}
	kubecontainer.SortNewestFirst(state.Containers)
	return state, checks
}

// describeActions writes a's actions one a line, in a fixed order:
//
//	create-infra [crashed]
//	kill <id> <reason> [grace=<own grace>]   (by ID)
//	init|start|ephemeral <name> [restarts=<count, if not 0>] [crashed]
//	wait <name> [pull]
//	retry +<offset>
//	init-failed
//	sandbox-gone
//
// or "nothing".
func describeActions(pod *v1.Pod, a podActions, t0 time.Time) string {
	var lines []string
	crashed := func(name string) string {
		if _, ok := a.crashed[name]; ok {
			return " crashed"
		}
		return ""
	}
	if a.createInfra {
		lines = append(lines, "create-infra"+crashed(infraName))
	}
	var kills []string
	for _, k := range a.kill {
		s := "kill " + k.c.ID + " " + k.reason.String()
		if k.ownGrace {
			s += " grace=" + k.grace.String()
		}
		kills = append(kills, s)
	}
	sort.Strings(kills)
	lines = append(lines, kills...)
	start := func(verb, name string) {
		s := verb + " " + name
		if n := a.restarts[name]; n > 0 {
			s += fmt.Sprintf(" restarts=%d", n)
		}
		lines = append(lines, s+crashed(name))
	}
	if a.startInit >= 0 {
		start("init", pod.Spec.InitContainers[a.startInit].Name)
	}
	for _, i := range a.start {
		start("start", pod.Spec.Containers[i].Name)
	}
	for _, i := range a.ephemeral {
		lines = append(lines, "ephemeral "+pod.Spec.EphemeralContainers[i].Name+crashed(pod.Spec.EphemeralContainers[i].Name))
	}
	for _, name := range a.waiting {
		if a.pullWaits[name] != nil {
			name += " pull"
		}
		lines = append(lines, "wait "+name)
	}
	if !a.retryAt.IsZero() {
		lines = append(lines, "retry +"+a.retryAt.Sub(t0).String())
	}
	if a.initFailed {
		lines = append(lines, "init-failed")
	}
	if a.sandboxGone {
		lines = append(lines, "sandbox-gone")
	}
	if len(lines) == 0 {
		return "nothing"
	}
	return strings.Join(lines, "\n")
}

// specHash is the hash of the pod's container name (POD: the sandbox's);
// "" for one not in the spec.
func specHash(t *testing.T, pod *v1.Pod, name string) string {
	t.Helper()
	if name == infraName {
		return kubecontainer.HashInfra(pod)
	}
	if c := kubecontainer.ContainerSpec(pod, name); c != nil {
		return kubecontainer.HashContainer(pod, c)
	}
	return "gone"
}

func offset(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("offset %q: %v", s, err)
	}
	return d
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// Every kind of kill says why in the log, and in the Killing event the
// kubelet's words where the kubelet has its own (else the event is the
// plain "Stopping container <name>").
func TestKillReasonWords(t *testing.T) {
	for _, tc := range []struct {
		reason     killReason
		event, log string
	}{
		{killReason{kind: killProbe, probe: "liveness", restart: true}, "Container c failed liveness probe, will be restarted", ""},
		{killReason{kind: killProbe, probe: "startup", restart: true}, "Container c failed startup probe, will be restarted", ""},
		{killReason{kind: killProbe, probe: "liveness"}, "Container c failed liveness probe", ""},
		{killReason{kind: killProbe, probe: "startup", sidecar: true}, "Init container c failed startup probe", ""},
		{killReason{kind: killSpecChanged}, "Container c definition changed, will be restarted", ""},
		{killReason{kind: killInitSpecChanged}, "", "its definition changed"},
		{killReason{kind: killSandboxGone}, "", "its infra container is gone"},
		{killReason{kind: killNewSandbox}, "", "the pod gets a new infra container"},
		{killReason{kind: killSandboxChanged}, "", "the pod's infra container changed"},
		{killReason{kind: killStaleIncarnation}, "", "it ran in an earlier infra container"},
		{killReason{kind: killDuplicate}, "", "a newer instance runs"},
		{killReason{kind: killNotInSpec}, "", "no longer in the pod's spec"},
		{killReason{kind: killPodDone}, "", "the pod has nothing left to run"},
		{killReason{kind: killResizeRestart}, "Container c resize requires restart", ""},
	} {
		t.Run(tc.reason.String(), func(t *testing.T) {
			if got := tc.reason.event("c"); got != tc.event {
				t.Errorf("event %q, want %q", got, tc.event)
			}
			want := tc.log
			if want == "" {
				want = tc.event
			}
			if got := tc.reason.describe("c"); got != want {
				t.Errorf("log %q, want %q", got, want)
			}
		})
	}
	if n := len(killKindNames); n != int(killResizeRestart) {
		t.Errorf("%d kinds named, want %d", n, killResizeRestart)
	}
}
