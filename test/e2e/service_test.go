package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// The agent speaks systemd's notify protocol: READY once it serves, watchdog
// pings, STOPPING on SIGTERM; and it exits 0 within 5 s, leaving pods up.
func TestNotifyProtocolAndGracefulExit(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "1000000")
	messages := make(chan string, 100)
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(messages)
				return
			}
			messages <- string(buf[:n])
		}
	}()
	expect := func(want string, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case m := <-messages:
				if m == want {
					return
				}
			case <-deadline:
				t.Fatalf("no %q within %v", want, within)
			}
		}
	}
	a := startAgent(t)
	expect("READY=1", 15*time.Second)
	// Ready means serving: the API answers at once.
	if code, _ := httpGet(a.api(true) + "/healthz/syncloop"); code != 200 {
		t.Errorf("after READY=1 /healthz/syncloop = %d", code)
	}
	expect("WATCHDOG=1", 3*time.Second)

	a.writeManifest("pod.yaml", twoContainerPod("survives", "x"))
	before := a.waitRunning("survives", "server", "sidecar")
	start := time.Now()
	a.stop(syscall.SIGTERM)
	took := time.Since(start)
	expect("STOPPING=1", time.Second)
	if a.exitErr != nil || took > 5*time.Second {
		t.Errorf("SIGTERM: exit %v after %v, want 0 within 5 s", a.exitErr, took)
	}
	after := a.running("survives")
	for name, c := range before {
		if after[name].ID != c.ID {
			t.Errorf("container %s did not survive the agent's exit", name)
		}
	}
}

// On a node without the infra image the agent builds it from the pause
// program installed beside it (never pulled).
func TestInfraImageBuiltFromInstalledPause(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "classic-kubelet")
	data, err := os.ReadFile(agentBinary)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bin, data, 0o755)
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "classic-kubelet-pause"), "github.com/classic-kubelet/kubelet/cmd/pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build pause: %v %s", err, out)
	}
	var b [4]byte
	rand.Read(b[:])
	image := "classic-kubelet/pause:e2e-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { _ = dockerc.RemoveImageExtended(image, docker.RemoveImageOptions{Force: true}) })

	a := startAgent(t, "--pod-infra-container-image", image)
	a.stop(syscall.SIGKILL)
	a.binary = bin
	a.start()
	a.writeManifest("pod.yaml", twoContainerPod("selfbuilt", "x"))
	running := a.waitRunning("selfbuilt", "server", "sidecar")
	if got := inspect(t, running["POD"].ID).Config.Image; got != image {
		t.Errorf("infra container image %q, want %q", got, image)
	}
	if !strings.Contains(a.log(), "Building infra image "+image) {
		t.Error("the agent did not say it built the infra image")
	}
}

func TestServiceUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is required under CI=true: run hack/ensure-test-deps.sh")
		}
		t.Skip("systemd-analyze not installed")
	}
	unit, err := os.ReadFile("../../examples/systemd/classic-kubelet.service")
	if err != nil {
		t.Fatal(err)
	}
	text := string(unit)
	for _, want := range []string{"Type=notify", "KillMode=process", "Restart=always", "After=docker.service", "WatchdogSec=", "OOMScoreAdjust=-999"} {
		if !strings.Contains(text, want) {
			t.Errorf("unit lacks %s", want)
		}
	}
	path := filepath.Join(t.TempDir(), "classic-kubelet.service")
	os.WriteFile(path, []byte(strings.ReplaceAll(text, "/usr/local/bin/classic-kubelet", agentBinary)), 0o644)
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestConfigFileAndVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(agentBinary, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "classic-kubelet ") {
		t.Errorf("--version: %v %q", err, out)
	}
	// --help prints the flags and exits 0 (it exited 2, as on a bad flag).
	if out, err := exec.Command(agentBinary, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "--pod-manifest-path") {
		t.Errorf("--help: %v %.200q", err, out)
	}
	manifests := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("pod-manifest-path: "+manifests+"\nsync-frequency: 5s\n"), 0o644)
	a := startAgent(t, "--kubelet-config", cfg)
	// The command line's --pod-manifest-path wins over the file's.
	os.WriteFile(filepath.Join(manifests, "ignored.yaml"), []byte(twoContainerPod("ignored", "x")), 0o644)
	a.writeManifest("used.yaml", twoContainerPod("used", "x"))
	a.waitRunning("used", "server", "sidecar")
	if n := len(a.containers("ignored")); n != 0 {
		t.Errorf("a flag did not win over the config file: %d containers of the file's manifests", n)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("no-such-setting: 1\n"), 0o644)
	if out, err := exec.Command(agentBinary, "--kubelet-config", bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "no-such-setting") {
		t.Errorf("unknown config key: %v %s", err, out)
	}
}

// SIGHUP re-reads the config file: sources apply live, settings that
// cannot are named in the log.
func TestSIGHUPReloadsSources(t *testing.T) {
	t.Parallel()
	one := newManifestServer(t, simplePod("from-one", "1"))
	two := newManifestServer(t, simplePod("from-two", "1"))
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("manifest-url: "+one.URL+"\nhttp-check-frequency: 1s\n"), 0o644)
	a := startAgent(t, "--kubelet-config", cfg)
	a.waitRunning("from-one", "server")

	os.WriteFile(cfg, []byte("manifest-url: "+two.URL+"\nhttp-check-frequency: 1s\ncluster-domain: other.test\n"), 0o644)
	a.mu.Lock()
	proc := a.cmd.Process
	a.mu.Unlock()
	if err := proc.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	a.waitRunning("from-two", "server")
	waitFor(t, 30*time.Second, func() (bool, string) { return len(a.containers("from-one")) == 0, "pod of the old URL still there" })
	waitFor(t, 5*time.Second, func() (bool, string) {
		return strings.Contains(a.log(), "--cluster-domain changed; a restart is needed"), "no restart-needed warning"
	})
}
