package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// envFilePod is a pod whose init container writes an env file into an
// emptyDir and whose app container takes variables from it (fileKeyRef),
// without mounting the volume itself, as Kubernetes' EnvFiles example.
func envFilePod(name, env string) string {
	return lifecyclePod(name, "Always", `  volumes:
  - {name: envdir, emptyDir: {}}
  initContainers:
  - name: render
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "printf \"DB_HOST='db.local'\\n# a comment\\nMOTD='two\\nlines'\\n\" > /env/app.env"]
    volumeMounts: [{name: envdir, mountPath: /env}]
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    env:
`+env)
}

// fileKeyRef: the app container's variable is the key's value in the file
// the init container wrote (a multi-line value too); an optional key that
// is absent makes no variable.
func TestPodFields137FileKeyRef(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("envfile.yaml", envFilePod("envfile", `    - name: DB
      valueFrom: {fileKeyRef: {volumeName: envdir, path: app.env, key: DB_HOST}}
    - name: MOTD
      valueFrom: {fileKeyRef: {volumeName: envdir, path: app.env, key: MOTD}}
    - name: URL
      value: "tcp://$(DB):5432"
    - name: NONE
      valueFrom: {fileKeyRef: {volumeName: envdir, path: app.env, key: ABSENT, optional: true}}
`))
	a.waitRunning("envfile", "app")
	code, out := a.execIn("envfile", "app", "sh", "-c", `printf '%s|%s|%s|%s' "$DB" "$MOTD" "$URL" "${NONE-unset}"`)
	if want := "db.local|two\nlines|tcp://db.local:5432|unset"; code != 0 || out != want {
		t.Errorf("env: exit %d, %q; want %q", code, out, want)
	}
}

// fileKeyRef to a key the file lacks, not optional: the container waits
// with CreateContainerConfigError and the kubelet's message, naming the key
// and the file on the host, and is never created.
func TestPodFields137FileKeyRefMissingKey(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("nokey.yaml", envFilePod("nokey", `    - name: PORT
      valueFrom: {fileKeyRef: {volumeName: envdir, path: app.env, key: PORT}}
`))
	// pkg/kubelet/kubelet_pods.go: "environment variable key %q not found in file %q".
	a.expectConfigError("nokey", "app", `environment variable key "PORT" not found in file "`+a.rootDir+"/pods/", "a missing env file key")
	_, msg := a.waitingReason("nokey", "app")
	if !strings.HasSuffix(msg, `/volumes/kubernetes.io~empty-dir/envdir/app.env"`) {
		t.Errorf("message %q does not name the env file", msg)
	}
	if s := a.status("nokey"); s.Phase != "Pending" {
		t.Errorf("phase %s, want Pending", s.Phase)
	}
}

// An image reference that does not parse is InvalidImageName within
// seconds, with the kubelet's message (pkg/kubelet/images/image_manager.go,
// applyDefaultImageTag), its InspectFailed and Failed events; nothing is
// pulled (no pull_image runtime operation) and the container is retried on
// its back-off, not in a loop.
func TestPodFields137InvalidImageName(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("badimage.yaml", lifecyclePod("badimage", "Always", `  containers:
  - name: tutorial
    image: <your-private-image>
    command: ["sleep", "1000"]
  - name: upper
    image: RW4B/Invalid:Image
    imagePullPolicy: IfNotPresent
    command: ["sleep", "1000"]
`))
	want := map[string]string{
		"tutorial": `Failed to apply default image tag "<your-private-image>": couldn't parse image name "<your-private-image>": invalid reference format`,
		"upper":    `Failed to apply default image tag "RW4B/Invalid:Image": couldn't parse image name "RW4B/Invalid:Image": invalid reference format: repository name (Invalid) must be lowercase`,
	}
	start := time.Now()
	waitFor(t, 10*time.Second, func() (bool, string) {
		var got []string
		for name, msg := range want {
			reason, m := a.waitingReason("badimage", name)
			if reason != "InvalidImageName" || m != msg {
				return false, fmt.Sprintf("%s waiting %q %q", name, reason, m)
			}
			got = append(got, name)
		}
		return true, strings.Join(got, ",")
	})
	t.Logf("InvalidImageName after %v", time.Since(start).Round(100*time.Millisecond))
	for _, reason := range []string{"InspectFailed", "Failed"} {
		waitFor(t, 5*time.Second, func() (bool, string) {
			e, ok := a.findEvent("badimage", reason)
			wantMsg := "Error: InvalidImageName"
			if reason == "InspectFailed" {
				wantMsg = want[strings.TrimSuffix(strings.TrimPrefix(e.InvolvedObject.FieldPath, "spec.containers{"), "}")]
			}
			return ok && e.Type == "Warning" && e.Message == wantMsg, fmt.Sprintf("%s event %+v", reason, e)
		})
	}
	// Under the default 10 s back-off, a few rounds see at most one more
	// attempt per container; a loop would make dozens.
	attempts := map[string]string{"code": "InvalidImageName"}
	before := a.metric("kubelet_started_containers_errors_total", attempts)
	a.waitRounds(4)
	if n := a.metric("kubelet_started_containers_errors_total", attempts) - before; before < 2 || n > 2 {
		t.Errorf("%v InvalidImageName attempts, then %v more over a few rounds; want at least 2, then at most 2", before, n)
	}
	if n := a.metric("kubelet_runtime_operations_total", map[string]string{"operation_type": "pull_image"}); n != 0 {
		t.Errorf("%v pull_image runtime operations, want none", n)
	}
	if len(a.containers("badimage")) > 1 {
		t.Errorf("containers %v, want the infra container alone", keys(a.running("badimage")))
	}
}
