package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Labels and annotations are validated as the API server does: a label key
// with a newline (which used to forge a line of a downwardAPI labels file)
// and 300 KiB of annotations are refused naming the field, from a file and
// from POST /pods, while a valid pod beside them runs.
func TestMetadataValidatedAsAPIServer(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	meta := func(name, extra string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n%sspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - {name: app, image: %s, command: [sleep, \"100000\"]}\n", name, extra, testImage)
	}
	a.writeManifest("fine.yaml", meta("fine", "  labels: {app: web, example.com/tier: front}\n  annotations: {example.com/note: \"any\\nvalue\"}\n"))
	a.writeManifest("newline.yaml", meta("newline", "  labels: {\"app\\nforged\": x}\n"))
	a.writeManifest("value.yaml", meta("value", "  labels: {app: \"a b\"}\n"))
	a.writeManifest("annotations.yaml", meta("annotations", "  annotations:\n    a: "+strings.Repeat("x", 150<<10)+"\n    b: "+strings.Repeat("x", 150<<10)+"\n"))
	a.waitRunning("fine", "app")
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		ok := strings.Contains(sources, `newline.yaml: document 1: pod \"newline\": metadata.labels: Invalid value: \"app\\nforged\"`) &&
			strings.Contains(sources, `value.yaml: document 1: pod \"value\": metadata.labels: Invalid value: \"a b\"`) &&
			strings.Contains(sources, `annotations.yaml: document 1: pod \"annotations\": metadata.annotations: Too long: may not be more than 262144 bytes`)
		return ok, "/sources: " + tail(sources, 10)
	})
	code, body := request(t, "POST", a.api(false)+"/pods", meta("posted", "  labels: {\"a/b/c\": x}\n"))
	if code != 400 || !strings.Contains(body, `metadata.labels: Invalid value: \"a/b/c\"`) {
		t.Errorf("POST /pods with an invalid label key = %d %s, want 400 naming metadata.labels", code, body)
	}
	a.waitRounds(3)
	for _, pod := range []string{"newline", "value", "annotations", "posted"} {
		if n := len(a.containers(pod)); n != 0 {
			t.Errorf("refused pod %s got %d containers", pod, n)
		}
	}
}

// 9.99 MiB of one-line annotation keys is refused before it is decoded
// (before: accepted, 706k annotations, a peak of 536 MB RSS); the file's
// neighbour runs.
func TestManyKeysManifestBounded(t *testing.T) {
	a := startAgent(t)
	a.writeManifest("fine.yaml", lifecyclePod("fine", "Always", "  containers:\n  - {name: app, image: "+testImage+", command: [sleep, \"100000\"]}\n"))
	a.waitRunning("fine", "app")
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: keys\n  annotations:\n")
	for i := 0; b.Len() < 10<<20-10<<10; i++ {
		fmt.Fprintf(&b, "    k%d: v\n", i)
	}
	fmt.Fprintf(&b, "spec:\n  containers:\n  - {name: app, image: %s, command: [sleep, \"100000\"]}\n", testImage)
	a.writeManifest("keys.yaml", b.String())
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		return strings.Contains(sources, "keys.yaml: api: manifest too complex to decode: 705"),
			fmt.Sprintf("agent peak RSS %d MiB; /sources: %s", a.procStatus("VmHWM")>>10, tail(sources, 10))
	})
	if n := len(a.containers("keys")); n != 0 {
		t.Errorf("the refused pod got %d containers", n)
	}
	if peak := a.procStatus("VmHWM"); peak > 150<<10 {
		t.Errorf("agent peak RSS %d MiB, want ≤ 150 MiB", peak>>10)
	} else {
		t.Logf("agent peak RSS %d MiB", peak>>10)
	}
}

// Thirty concurrent GET /pods of one large pod on the read-only port are
// answered from one encoding (before: a deep copy and an encoding per
// request, 45 MB each for a 10 MiB pod).
func TestConcurrentPodListsShareOneEncoding(t *testing.T) {
	a := startAgent(t)
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: large\n  annotations:\n    example.com/big: " + strings.Repeat("x", 200<<10) + "\n  labels:\n")
	for i := range 40000 {
		fmt.Fprintf(&b, "    example.com/l%06d-%s: %s\n", i, strings.Repeat("k", 48), strings.Repeat("v", 63))
	}
	fmt.Fprintf(&b, "spec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - {name: app, image: %s, command: [sleep, \"100000\"]}\n", testImage)
	a.writeManifest("large.yaml", b.String())
	a.waitRunning("large", "app")
	a.waitRounds(3)
	a.resetPeakRSS() // no GET /pods before: the first of the thirty encodes
	before := a.procStatus("VmRSS")
	var wg sync.WaitGroup
	sizes := make([]int, 30)
	for i := range sizes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// httpGet's 2 s would end the slow answers of before.
			c := http.Client{Timeout: 2 * time.Minute}
			resp, err := c.Get(a.api(true) + "/pods")
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			n, _ := io.Copy(io.Discard, resp.Body)
			sizes[i] = int(n)
		}()
	}
	wg.Wait()
	for i, n := range sizes {
		if n < 5<<20 {
			t.Errorf("client %d read %d bytes, want the large pod's labels (5 MiB)", i, n)
		}
	}
	growth := (a.procStatus("VmHWM") - before) >> 10
	if growth > 100 {
		t.Errorf("30 concurrent GET /pods of %d MiB grew the agent's RSS by %d MiB, want ≤ 100 MiB", sizes[0]>>20, growth)
	} else {
		t.Logf("30 concurrent GET /pods of %d MiB grew the agent's RSS by %d MiB", sizes[0]>>20, growth)
	}
}

// resetPeakRSS makes VmHWM the agent's current RSS (clear_refs 5).
func (a *agent) resetPeakRSS() {
	a.t.Helper()
	a.mu.Lock()
	pid := a.cmd.Process.Pid
	a.mu.Unlock()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o644); err != nil {
		a.t.Fatal(err)
	}
}
