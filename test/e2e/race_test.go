package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRaceBuildScenario runs an agent built with -race through pods with
// probes, concurrent starts, SIGHUP reloads, exec and API load, and asserts
// that the race detector reported nothing. It asserts no timings. Its load
// is sized for a parallel test on two cores: three pods, each path of the
// API asked five times a second (a race-built agent costs several times
// the CPU, and each exec probe a Docker exec).
func TestRaceBuildScenario(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "kubelet-race")
	build := exec.Command("go", "build", "-race", "-o", bin, "github.com/classic-kubelet/kubelet/cmd/kubelet")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -race (needs cgo and a C compiler): %v\n%s", err, out)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("v: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgentWith(t, func(a *agent) { a.binary, a.env = bin, []string{"GORACE=halt_on_error=0"} }, "--kubelet-config", cfg)
	const pods = 3
	for i := range pods {
		a.writeManifest(fmt.Sprintf("r%d.yaml", i), lifecyclePod(fmt.Sprintf("r%d", i), "Always", `  containers:
  - name: server
    image: `+testImage+`
    livenessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 1}
  - name: side
    image: `+testImage+`
    command: ["sleep", "100000"]
`))
	}
	a.waitAPI()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, path := range []string{"/pods", "/stats/summary", "/metrics", "/sources", "/healthz", "/metrics/cadvisor"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := http.Client{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if resp, err := c.Get(a.api(true) + path); err == nil {
					resp.Body.Close()
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	for i := range pods {
		// The race detector slows the agent several times over, and other
		// parallel tests share the two cores.
		a.waitRunningWithin(3*time.Minute, fmt.Sprintf("r%d", i), "server", "side")
	}
	a.mu.Lock()
	proc := a.cmd.Process
	a.mu.Unlock()
	for v := range 3 {
		_ = os.WriteFile(cfg, []byte(fmt.Sprintf("v: %d\n", 2+v%2)), 0o644)
		if err := proc.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		a.execIn("r0", "side", "true")
		if code, body := request(t, "POST", a.api(false)+"/pods", simplePod(fmt.Sprintf("posted%d", v), "1")); code != 200 {
			t.Errorf("POST = %d %s", code, body)
		}
		time.Sleep(time.Second)
	}
	a.removeManifest(fmt.Sprintf("r%d.yaml", pods-1))
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	a.stop(syscall.SIGTERM)
	if log := a.log(); strings.Contains(log, "DATA RACE") {
		i := strings.Index(log, "WARNING: DATA RACE")
		t.Fatalf("the race detector reported races:\n%s", log[i:min(len(log), i+6000)])
	}
}
