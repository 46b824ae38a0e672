package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// previousBuild is the last commit of main before the runtime manager
// (issue 33) moved the container naming, labels, spec hashes and create
// specs out of the root package.
const previousBuild = "0efd1c2"

// buildAt builds the agent as it was at commit, from this checkout's history.
func buildAt(t *testing.T, commit string) string {
	t.Helper()
	// A shallow clone lacks the commit: the upgrade cannot be tested there,
	// and the test says so rather than pass.
	if err := exec.Command("git", "-C", "../..", "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this checkout's history (a shallow clone?): the upgrade from it is not tested", commit)
	}
	src, bin := t.TempDir(), filepath.Join(t.TempDir(), "kubelet-"+commit)
	archive := exec.Command("sh", "-c", "git -C ../.. archive "+commit+" | tar -x -C "+src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("the source of the previous build (%s) is not in this checkout's history: %v\n%s", commit, err, out)
	}
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubelet")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the agent at %s: %v\n%s", commit, err, out)
	}
	return bin
}

// Containers the previous build made are adopted by this one after an
// upgrade: the same names, labels and spec hashes, so nothing is recreated
// or restarted, init containers are not run again, and the pod is Ready.
func TestUpgradeAdoptsContainers(t *testing.T) {
	t.Parallel()
	old := buildAt(t, previousBuild)
	a := startAgentWith(t, func(a *agent) { a.binary, a.legacy = old, true })
	a.writeManifest("kept.yaml", lifecyclePod("kept", "Always", `  initContainers:
  - {name: init, image: `+testImage+`, imagePullPolicy: IfNotPresent, command: [sh, -c, "true"]}
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    env: [{name: GREETING, value: hello}]
    ports: [{containerPort: 8080}]
    resources: {limits: {memory: 64Mi, cpu: 100m}}
    readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
  - name: side
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: [sleep, "100000"]
`))
	before := ids(a.waitRunning("kept", "app", "side"))
	a.stop(syscall.SIGTERM)

	a.binary, a.legacy = "", false
	a.start()
	a.waitAPI()
	waitFor(t, startupWait, func() (bool, string) {
		ready := a.status("kept").condition("Ready")
		return ready == "True", fmt.Sprintf("Ready %q", ready)
	})
	a.waitRounds(3)
	if now := ids(a.running("kept")); fmt.Sprint(now) != fmt.Sprint(before) {
		t.Errorf("containers after the upgrade %v, were %v", now, before)
	}
	for _, name := range []string{"init", "app", "side"} {
		if n := len(a.instances("kept", name)); n != 1 {
			t.Errorf("%d instances of %s after the upgrade, want 1", n, name)
		}
	}
}
