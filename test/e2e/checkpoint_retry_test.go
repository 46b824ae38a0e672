package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// fileSourceStatus returns the file source's entry of GET /sources.
func (a *agent) fileSourceStatus() map[string]any {
	a.t.Helper()
	_, body := httpGet(a.api(true) + "/sources")
	var list []map[string]any
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		a.t.Fatalf("GET /sources: %v: %s", err, body)
	}
	for _, s := range list {
		if s["name"] == "file" {
			return s
		}
	}
	a.t.Fatalf("GET /sources has no file source: %s", body)
	return nil
}

// A file pod added while its checkpoint cannot be written runs, /sources
// says the checkpoint is behind, and once the directory is writable again
// the checkpoint is written: a restart then keeps the pod as it runs
// instead of killing it for an older checkpoint and starting it again.
func TestFailedCheckpointIsRetried(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("kept.json", simplePod("cp-kept", "1"))
	a.waitRunning("cp-kept", "server")

	// The checkpoint directory becomes a file: nothing can be written there,
	// even by root (which ignores permission bits).
	dir := filepath.Join(a.rootDir, "checkpoints")
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a.writeManifest("added.json", simplePod("cp-added", "1"))
	added := ids(a.waitRunning("cp-added", "server"))
	if behind, _ := a.fileSourceStatus()["checkpointBehind"].(string); behind == "" {
		t.Errorf("/sources does not say the file source's checkpoint is behind: %v", a.fileSourceStatus())
	}

	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+".away", dir); err != nil {
		t.Fatal(err)
	}
	// Retried with back-off: 1, 2, 4, 8 s after the first failure.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := a.fileSourceStatus()
		if st["checkpointBehind"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the checkpoint is still behind 30 s after its directory came back: %v", st)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	a.stop(syscall.SIGKILL)
	a.start()
	a.waitRounds(4)
	if now := ids(a.running("cp-added")); fmt.Sprint(now) != fmt.Sprint(added) {
		t.Errorf("pod cp-added: containers %v after the restart, were %v: it was killed and recreated", now, added)
	}
}
