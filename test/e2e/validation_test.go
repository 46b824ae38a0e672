package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// expectRefused writes a pod that is valid and one file per refused pod,
// waits for the valid one to run and for /sources to show every error
// wanted (each naming its file and field), then checks that no refused pod
// got a container.
func (a *agent) expectRefused(refused map[string]string, wants ...string) {
	a.t.Helper()
	a.writeManifest("fine.yaml", lifecyclePod("fine", "Always", `  containers:
  - {name: app, image: `+testImage+`, command: `+sleeper+`}
`))
	for name, body := range refused {
		a.writeManifest(name+".yaml", lifecyclePod(name, "Always", body))
	}
	a.waitRunning("fine", "app")
	waitFor(a.t, 20*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		for _, want := range wants {
			if !strings.Contains(sources, want) {
				return false, fmt.Sprintf("/sources lacks %q: %s", want, sources)
			}
		}
		return true, ""
	})
	for name := range refused {
		if n := len(a.containers(name)); n != 0 {
			a.t.Errorf("refused pod %s got %d containers", name, n)
		}
	}
}

// File modes past 0777 in a downwardAPI volume or projection are refused
// as by the API server, naming the field (before: accepted, and 04755
// silently written 0755).
func TestVolumeModesRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	volume := func(src string) string {
		return "  volumes: [{name: v, " + src + "}]\n  containers:\n  - {name: app, image: " + testImage +
			", command: " + sleeper + ", volumeMounts: [{name: v, mountPath: /v}]}\n"
	}
	a.expectRefused(map[string]string{
		"setuid":    volume("downwardAPI: {defaultMode: 04755, items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}"),
		"setgid":    volume("downwardAPI: {items: [{path: name, mode: 02777, fieldRef: {fieldPath: metadata.name}}]}"),
		"projected": volume("projected: {sources: [{downwardAPI: {items: [{path: name, mode: 04755, fieldRef: {fieldPath: metadata.name}}]}}]}"),
	},
		"setuid.yaml", `spec.volumes[0].downwardAPI.defaultMode: Invalid value: 2541: must be a number between 0 and 0777 (octal), both inclusive`,
		"setgid.yaml", `spec.volumes[0].downwardAPI.items[0].mode: Invalid value: 1535`,
		"projected.yaml", `spec.volumes[0].projected.sources[0].downwardAPI.items[0].mode: Invalid value: 2541`)
}

// Item paths whose first element starts with ".." are refused as by the
// API server (before: ..data/x was written into the volume, beside the
// atomic writer's own ..data).
func TestVolumeReservedPathsRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	volume := func(src string) string {
		return "  volumes: [{name: v, " + src + "}]\n  containers:\n  - {name: app, image: " + testImage +
			", command: " + sleeper + ", volumeMounts: [{name: v, mountPath: /v}]}\n"
	}
	a.expectRefused(map[string]string{
		"dotdata":   volume("downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}, {path: ..data/x, fieldRef: {fieldPath: metadata.namespace}}]}"),
		"configmap": volume("configMap: {name: c, items: [{key: k, path: ..data}]}"),
		"token":     volume("projected: {sources: [{serviceAccountToken: {path: ..token}}]}"),
	},
		"dotdata.yaml", `spec.volumes[0].downwardAPI.items[1].path: Invalid value: \"..data/x\": must not start with '..'`,
		"configmap.yaml", `spec.volumes[0].configMap.items[0].path: Invalid value: \"..data\": must not start with '..'`,
		"token.yaml", `spec.volumes[0].projected.sources[0].serviceAccountToken.path: Invalid value: \"..token\"`)
}

// Environment variable names and envFrom prefixes are the API server's:
// printable ASCII without '=' (before: "A\nB" reached the container's
// environment).
func TestEnvNamesRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	container := func(extra string) string {
		return "  containers:\n  - {name: app, image: " + testImage + ", command: " + sleeper + ", " + extra + "}\n"
	}
	a.expectRefused(map[string]string{
		"newline": container(`env: [{name: "A\nB", value: x}]`),
		"accent":  container(`env: [{name: "NAÏVE", value: x}]`),
		"prefix":  container(`envFrom: [{prefix: "P\n", configMapRef: {name: c}}]`),
	},
		"newline.yaml", `spec.containers[0].env[0].name: Invalid value: \"A\\nB\": a valid environment variable name must consist only of printable ASCII characters other than '='`,
		"accent.yaml", `spec.containers[0].env[0].name: Invalid value: \"NAÏVE\"`,
		"prefix.yaml", `spec.containers[0].envFrom[0].prefix: Invalid value: \"P\\n\"`)
}

// A pod whose memory limit is 8Ei (2^63-1 bytes once parsed, which the API
// server takes) and no request is refused as the kubelet's admission
// refuses it, OutOfmemory, naming the field; 8Ei over a request that fits
// runs, as in Kubernetes (before: both ran, and the first claimed 8 EiB).
func TestPodLargerThanTheNodeRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("overcommit.yaml", lifecyclePod("overcommit", "Always", "  containers:\n  - {name: app, image: "+testImage+
		", command: "+sleeper+", resources: {requests: {memory: 64Mi}, limits: {memory: 8Ei}}}\n"))
	a.expectRefused(map[string]string{
		"huge": "  containers:\n  - {name: app, image: " + testImage + ", command: " + sleeper + ", resources: {limits: {memory: 8Ei}}}\n",
		"cpus": "  containers:\n  - {name: app, image: " + testImage + ", command: " + sleeper + ", resources: {requests: {cpu: 100k}}}\n",
	},
		`pod default/huge from source \"file\" rejected (OutOfmemory): it requests 9223372036854775807 of memory, more than the node's allocatable`,
		`(spec.containers[0].resources.limits[memory]: 9223372036854775807, the request it lacks)`,
		`pod default/cpus from source \"file\" rejected (OutOfcpu): it requests 100k of cpu`)
	if phase, reason, msg := a.podPhaseReason("huge"); phase != "Pending" || reason != "OutOfmemory" || !strings.HasPrefix(msg, "Pod was rejected: ") {
		t.Errorf("/pods shows huge as %s %s %q, want Pending OutOfmemory", phase, reason, msg)
	}
	a.waitRunning("overcommit", "app")
}

// Local storage limits past what the node holds are never reached (before:
// an emptyDir sizeLimit of 1e30 had no int64 value, counted as 0, and the
// pod was evicted at its first byte; so was a pod whose containers'
// ephemeral-storage limits summed past 2^63-1).
func TestLocalStorageLimitsPastTheNode(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const writer = `["sh", "-c", "echo x > /data/f; exec sleep 100000"]`
	a.writeManifest("bigdir.yaml", lifecyclePod("bigdir", "Always", `  volumes: [{name: data, emptyDir: {sizeLimit: 1e30}}]
  containers:
  - {name: app, image: `+testImage+`, command: `+writer+`, volumeMounts: [{name: data, mountPath: /data}]}
`))
	a.writeManifest("bigsum.yaml", lifecyclePod("bigsum", "Always", `  volumes: [{name: data, emptyDir: {}}]
  containers:
  - {name: app, image: `+testImage+`, command: `+writer+`, volumeMounts: [{name: data, mountPath: /data}], resources: {limits: {ephemeral-storage: 8Ei}}}
  - {name: other, image: `+testImage+`, command: `+sleeper+`, resources: {limits: {ephemeral-storage: 8Ei}}}
`))
	a.waitRunning("bigdir", "app")
	a.waitRunning("bigsum", "app", "other")
	a.waitRounds(6) // eviction rounds come every 2 s
	for _, pod := range []string{"bigdir", "bigsum"} {
		if phase, reason, msg := a.podPhaseReason(pod); phase != "Running" {
			t.Errorf("%s: %s %s %q, want Running", pod, phase, reason, msg)
		}
	}
	if log := a.log(); strings.Contains(log, "Eviction: evicting pod") {
		t.Errorf("the agent evicted a pod: %s", tail(log, 20))
	}
}
