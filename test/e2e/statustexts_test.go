package e2e

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	v1 "k8s.io/api/core/v1"
)

// apiPod is one pod as the agent's read-only API serves it, decoded as
// the API's type (the fields the texts tests read: imageID, volumeMounts,
// user).
func (a *agent) apiPod(name string) v1.Pod {
	a.t.Helper()
	var p v1.Pod
	if code, body := httpGet(a.api(true) + "/pods/default/" + name); code == 200 {
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			a.t.Fatalf("decode pod %s: %v", name, err)
		}
	}
	return p
}

// A Job's pod with a native sidecar: once its app container has exited 0,
// the pod stays Running with the app container terminated (never waiting
// again, never Pending) while the sidecar stops — here it ignores SIGTERM,
// so it takes the grace period — and then is Succeeded, as the kubelet's
// getPhase.
func TestStatusTexts137JobSidecarPhase(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("jobside.yaml", `apiVersion: v1
kind: Pod
metadata: {name: jobside}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 4
  initContainers:
  - name: proxy
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"]
  containers:
  - name: main
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 1"]
`)
	var seen []string
	sawRunning, sawDraining := false, false
	deadline := time.Now().Add(25 * time.Second)
	for {
		st := a.status("jobside")
		state := "none"
		if len(st.ContainerStatuses) == 1 {
			switch s := st.ContainerStatuses[0].State; {
			case s.Running != nil:
				state = "running"
			case s.Terminated != nil:
				state = fmt.Sprintf("terminated(%d)", s.Terminated.ExitCode)
			case s.Waiting != nil:
				state = "waiting " + s.Waiting.Reason
			}
		}
		step := st.Phase + "/" + state
		if len(seen) == 0 || seen[len(seen)-1] != step {
			seen = append(seen, step)
		}
		switch {
		case st.Phase == "Running":
			sawRunning = true
		case sawRunning && st.Phase == "Pending":
			t.Fatalf("Pending after Running: %v", seen)
		}
		if st.Phase == "Running" && state == "terminated(0)" {
			sawDraining = true
		}
		if sawRunning && strings.HasPrefix(state, "waiting") {
			t.Fatalf("the main container waits again after it ran: %v", seen)
		}
		if st.Phase == "Succeeded" || st.Phase == "Failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not finished in 25 s: %v", seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("phases: %v", seen)
	if last := seen[len(seen)-1]; last != "Succeeded/terminated(0)" {
		t.Errorf("ended %s, want Succeeded with the main container terminated(0): %v", last, seen)
	}
	if !sawDraining {
		t.Errorf("never Running with the main container terminated while the sidecar stopped: %v", seen)
	}
}

// imageID as the kubelet with cri-dockerd reports it: docker://sha256:<ID>
// for an image with no repo digest (made here), docker-pullable://
// <repo>@sha256:<digest> for one pulled from a registry.
func TestStatusTexts137ImageID(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t, false)
	local := uniqueImage(t, "classic-kubelet/e2e-imageid-local")
	pushed := uniqueImage(t, "classic-kubelet/e2e-imageid-pushed")
	repo := reg.addr + "/e2e/imageid"
	must(t, dockerc.TagImage(pushed, docker.TagImageOptions{Repo: repo, Tag: "1"}))
	must(t, dockerc.PushImage(docker.PushImageOptions{Name: repo, Tag: "1", Registry: reg.addr}, docker.AuthConfiguration{ServerAddress: reg.addr}))
	_ = dockerc.RemoveImageExtended(repo+":1", docker.RemoveImageOptions{NoPrune: true})
	t.Cleanup(func() { _ = dockerc.RemoveImageExtended(repo+":1", docker.RemoveImageOptions{NoPrune: true}) })

	a := startAgent(t)
	a.writeManifest("imgid.yaml", lifecyclePod("imgid", "Always", `  containers:
  - name: local
    image: `+local+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
  - name: pulled
    image: `+repo+`:1
    imagePullPolicy: Always
    command: `+sleeper+`
`))
	a.waitRunning("imgid", "local", "pulled")
	localImg, err := dockerc.InspectImage(local)
	must(t, err)
	pulledImg, err := dockerc.InspectImage(repo + ":1")
	must(t, err)
	want := map[string]string{"local": "docker://" + localImg.ID}
	for _, d := range pulledImg.RepoDigests {
		if strings.HasPrefix(d, repo+"@sha256:") {
			want["pulled"] = "docker-pullable://" + d
		}
	}
	if want["pulled"] == "" {
		t.Fatalf("the pulled image has no digest of %s: %v", repo, pulledImg.RepoDigests)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		got := map[string]string{}
		for _, cs := range a.apiPod("imgid").Status.ContainerStatuses {
			got[cs.Name] = cs.ImageID
		}
		return reflect.DeepEqual(got, want), fmt.Sprintf("imageIDs %v, want %v", got, want)
	})
}

// uniqueImage commits a container of the test image as a new image of its
// own (no repo digest; no other test touches it) tagged name:<unique>.
func uniqueImage(t *testing.T, name string) string {
	t.Helper()
	tag := fmt.Sprintf("%d", time.Now().UnixNano())
	c, err := dockerc.CreateContainer(docker.CreateContainerOptions{Config: &docker.Config{Image: testImage, Cmd: []string{"true"}}})
	must(t, err)
	defer func() { _ = dockerc.RemoveContainer(docker.RemoveContainerOptions{ID: c.ID, Force: true}) }()
	img, err := dockerc.CommitContainer(docker.CommitContainerOptions{Container: c.ID, Repository: name, Tag: tag})
	must(t, err)
	t.Cleanup(func() { _ = dockerc.RemoveImageExtended(img.ID, docker.RemoveImageOptions{Force: true}) })
	return name + ":" + tag
}

// Container statuses list the container's volume mounts as the kubelet's
// (a read-only one recursiveReadOnly Disabled) and the user its process
// runs as: uid, gid, and the groups, the primary one first.
func TestStatusTexts137VolumeMountsAndUser(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("mounts.yaml", lifecyclePod("mounts", "Always", `  securityContext:
    runAsUser: 1000
    runAsGroup: 3000
    supplementalGroups: [4000]
  volumes:
  - {name: data, emptyDir: {}}
  - {name: info, downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}}
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: info, mountPath: /etc/info, readOnly: true}
`))
	a.waitRunning("mounts", "app")
	disabled := v1.RecursiveReadOnlyDisabled
	wantMounts := []v1.VolumeMountStatus{
		{Name: "data", MountPath: "/data"},
		{Name: "info", MountPath: "/etc/info", ReadOnly: true, RecursiveReadOnly: &disabled},
	}
	wantUser := &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := a.apiPod("mounts").Status
		if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Running == nil {
			return false, fmt.Sprintf("statuses %+v", st.ContainerStatuses)
		}
		cs := st.ContainerStatuses[0]
		return reflect.DeepEqual(cs.VolumeMounts, wantMounts) && reflect.DeepEqual(cs.User, wantUser),
			fmt.Sprintf("volumeMounts %s user %s", asJSON(cs.VolumeMounts), asJSON(cs.User))
	})
	code, out := a.execIn("mounts", "app", "id")
	t.Logf("id in the container: %d %s", code, strings.TrimSpace(out))
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// An init container's (and a sidecar's) events point at
// spec.initContainers{name}, as the kubelet's; the app container's at
// spec.containers{name}.
func TestStatusTexts137InitContainerEventFieldPath(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("initref.yaml", lifecyclePod("initref", "Always", `  initContainers:
  - name: setup
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["true"]
  - name: helper
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: `+sleeper+`
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
`))
	a.waitRunning("initref", "helper", "app")
	want := map[string]bool{"spec.initContainers{setup}": true, "spec.initContainers{helper}": true, "spec.containers{app}": true}
	waitFor(t, 10*time.Second, func() (bool, string) {
		started := map[string]bool{}
		for _, e := range a.events("initref") {
			if e.Reason == "Started" {
				started[e.InvolvedObject.FieldPath] = true
			}
		}
		return reflect.DeepEqual(started, want), fmt.Sprintf("Started events at %v, want %v", started, want)
	})
}

// A postStart hook that fails: the kubelet's FailedPostStartHook event
// (without the hook's output, which may hold secrets) and Killing event,
// then the container waits with PostStartHookError and the kubelet's
// message, which holds the hook's output.
func TestStatusTexts137FailedPostStartHook(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--backoff-initial", "30s", "--backoff-max", "30s")
	a.writeManifest("posthook.yaml", lifecyclePod("posthook", "Always", `  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    lifecycle:
      postStart: {exec: {command: ["sh", "-c", "echo no config found >&2; exit 3"]}}
`))
	prefix := `Exec lifecycle hook ([sh -c echo no config found >&2; exit 3]) for Container "app" in Pod "posthook_default(`
	suffix := `)" failed - error: command 'sh -c echo no config found >&2; exit 3' exited with 3: no config found` + "\n" + `, message: "no config found\n"`
	waitFor(t, 20*time.Second, func() (bool, string) {
		reason, msg := a.waitingReason("posthook", "app")
		return reason == "PostStartHookError" && strings.HasPrefix(msg, prefix) && strings.HasSuffix(msg, suffix),
			fmt.Sprintf("waiting %q %q", reason, msg)
	})
	for _, w := range []struct{ reason, typ, message string }{
		{"FailedPostStartHook", "Warning", "PostStartHook failed"},
		{"Killing", "Normal", "FailedPostStartHook"},
	} {
		e, ok := a.findEvent("posthook", w.reason)
		if !ok || e.Type != w.typ || e.Message != w.message || e.InvolvedObject.FieldPath != "spec.containers{app}" {
			t.Errorf("%s event %+v (found %v), want %s %q", w.reason, e, ok, w.typ, w.message)
		}
	}
	// The first retry of a failure is immediate: the pod goes with the
	// agent still running, so no create is in flight when the test ends.
	a.removeManifest("posthook.yaml")
	waitFor(t, 15*time.Second, func() (bool, string) {
		n := len(a.containers("posthook"))
		return n == 0, fmt.Sprintf("%d containers left", n)
	})
}
