package e2e

import (
	"strings"
	"testing"
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
