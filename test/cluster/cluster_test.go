package cluster

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestStartFailure checks that a control plane that cannot start says why,
// with the failing process's log, and leaves nothing running.
func TestStartFailure(t *testing.T) {
	bin, err := BinDir("../..")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("SKIPPING: %v", err)
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skipf("SKIPPING: no etcd server (hack/ensure-test-deps.sh installs etcd-server): %v", err)
	}
	if _, err := InterfaceIPv4("docker0"); err != nil {
		t.Skipf("SKIPPING: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, dir, Options{BinDir: bin, APIServerArgs: []string{"--no-such-flag"}})
	if err == nil {
		c.Stop()
		t.Fatal("Start with a bad API server flag succeeded")
	}
	t.Logf("error: %v", err)
	for _, want := range []string{"kube-apiserver (exited", "unknown flag: --no-such-flag"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// etcd, started before, was stopped: its port is free and no process
	// has its data dir open.
	out, _ := exec.Command("pgrep", "-f", "--data-dir "+dir).Output()
	if len(out) > 0 {
		t.Errorf("processes left running: %s", out)
	}
}
