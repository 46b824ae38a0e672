package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The /var/log/pods tree the log shippers read: <ns>_<pod>_<uid>/<c>/<n>.log
// links to each instance's json-file log, n its restart count; the pod's
// directory goes with the pod.
func TestPodLogsTree(t *testing.T) {
	t.Parallel()
	podLogs := t.TempDir()
	a := startAgent(t, "--pod-logs-dir", podLogs)
	a.writeManifest("shipped.yaml", lifecyclePod("shipped", "Always", `  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo first line; echo second line; sleep 8; exit 1"]
`))
	first := a.waitRunning("shipped", "app")["app"]
	ct := inspect(t, first.ID)
	dir := filepath.Join(podLogs, "default_shipped_"+ct.Config.Labels["io.kubernetes.pod.uid"], "app")
	waitFor(t, 20*time.Second, func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(dir, "0.log"))
		return err == nil && strings.Contains(string(data), `"log":"first line\n"`) && strings.Contains(string(data), `"log":"second line\n"`),
			fmt.Sprintf("0.log: %q, %v", data, err)
	})
	if target, err := os.Readlink(filepath.Join(dir, "0.log")); err != nil || target != ct.LogPath {
		t.Errorf("0.log -> %q, %v; want Docker's log %q", target, err, ct.LogPath)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(dir, "1.log"))
		return err == nil && strings.Contains(string(data), "first line"), fmt.Sprintf("1.log after the restart: %q, %v", data, err)
	})
	if _, err := os.Stat(filepath.Join(dir, "0.log")); err != nil {
		t.Errorf("0.log of the dead instance, kept with it: %v", err)
	}
	a.removeManifest("shipped.yaml")
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, err := os.Lstat(filepath.Dir(dir))
		return os.IsNotExist(err), fmt.Sprintf("the pod's log directory after its removal: %v", err)
	})
}

// limitBytes, sinceTime and timestamps on /containerLogs, as the kubelet's.
func TestPodLogsEndpointOptions(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--pod-logs-dir", t.TempDir())
	a.writeManifest("opts.yaml", lifecyclePod("opts", "Always", `  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo early; sleep 3; echo late; sleep 3600"]
`))
	a.waitRunning("opts", "app")
	base := a.api(false) + "/containerLogs/default/opts/app"
	var stamped string
	waitFor(t, 20*time.Second, func() (bool, string) {
		var code int
		code, stamped = httpGet(base + "?timestamps=true")
		return code == 200 && strings.Contains(stamped, " late\n"), fmt.Sprintf("%d %q", code, stamped)
	})
	times := map[string]time.Time{}
	for _, line := range strings.Split(strings.TrimSuffix(stamped, "\n"), "\n") {
		ts, text, _ := strings.Cut(line, " ")
		when, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("timestamps=true line %q: %v", line, err)
		}
		times[text] = when
	}
	if times["early"].IsZero() || !times["late"].After(times["early"]) {
		t.Fatalf("timestamps: %q", stamped)
	}

	if code, body := httpGet(base + "?limitBytes=10"); code != 200 || body != "early\nlate" {
		t.Errorf("limitBytes=10: %d %q, want %q", code, body, "early\nlate")
	}
	if code, body := httpGet(base + "?limitBytes=10&timestamps=true"); code != 200 || body != stamped[:10] {
		t.Errorf("limitBytes=10&timestamps=true: %d %q, want %q", code, body, stamped[:10])
	}
	// Between the two lines: the second after early's, and late came 3 s on.
	since := times["early"].Truncate(time.Second).Add(2 * time.Second)
	if code, body := httpGet(base + "?sinceTime=" + url.QueryEscape(since.Format(time.RFC3339))); code != 200 || body != "late\n" {
		t.Errorf("sinceTime=%s: %d %q, want only the late line", since.Format(time.RFC3339), code, body)
	}
	if code, _ := httpGet(base + "?limitBytes=0"); code != 400 {
		t.Errorf("limitBytes=0: %d, want 400", code)
	}
	if code, _ := httpGet(base + "?sinceTime=yesterday"); code != 400 {
		t.Errorf("sinceTime=yesterday: %d, want 400", code)
	}
}
