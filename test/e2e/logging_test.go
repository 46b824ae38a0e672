package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// logEntry is a line of the agent's JSON log, as component-base's JSON
// format writes it.
type logEntry struct {
	TS     float64 `json:"ts"`
	Caller string  `json:"caller"`
	Msg    string  `json:"msg"`
	V      *int    `json:"v"`
	Err    string  `json:"err"`
}

// jsonLog parses the agent's log, every line a JSON object with a time, a
// message and (an info line) its verbosity.
func jsonLog(t *testing.T, a *agent) []logEntry {
	t.Helper()
	var out []logEntry
	for i, line := range strings.Split(strings.TrimSpace(a.log()), "\n") {
		var e logEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.TS == 0 || e.Msg == "" || e.Caller == "" {
			t.Fatalf("log line %d is not a JSON log entry (%v): %s", i+1, err, line)
		}
		out = append(out, e)
	}
	return out
}

// waitLogged waits for an entry of the JSON log whose message contains msg
// (and, v >= 0, whose verbosity is v).
func waitLogged(t *testing.T, a *agent, msg string, v int) logEntry {
	t.Helper()
	var found logEntry
	waitFor(t, 30*time.Second, func() (bool, string) {
		for _, e := range jsonLog(t, a) {
			if strings.Contains(e.Msg, msg) && (v < 0 || e.V != nil && *e.V == v) {
				found = e
				return true, ""
			}
		}
		return false, "no log entry " + msg
	})
	return found
}

// --logging-format=json (from the agent's configuration, as a
// KubeletConfiguration's logging.format would set it) makes the agent's own
// log JSON, a line an entry, as component-base writes it for the kubelet;
// a SIGHUP applies a new verbosity at once, and names the format change it
// cannot apply live.
func TestJSONLogging(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("logging-format: json\nv: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgentWith(t, func(a *agent) { a.fileLogging = true }, "--kubelet-config", cfg)
	a.writeManifest("web.json", simplePod("web", "1"))
	a.waitRunning("web", "server")
	waitLogged(t, a, "Classic Kubelet starting", 0)
	waitLogged(t, a, "started container", 0)

	// At -v 0 an emptied manifest file (a -v 2 line) is not logged.
	empty := filepath.Join(a.manifestDir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a.writeManifest("other.json", simplePod("other", "1"))
	a.waitRunning("other", "server") // the directory was read since
	for _, e := range jsonLog(t, a) {
		if e.V != nil && *e.V > 0 {
			t.Errorf("at -v 0, a -v %d entry: %s", *e.V, e.Msg)
		}
	}

	if err := os.WriteFile(cfg, []byte("logging-format: text\nv: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	proc := a.cmd.Process
	a.mu.Unlock()
	if err := proc.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogged(t, a, "SIGHUP: log verbosity now 2", 0)
	waitLogged(t, a, "the logging options (--logging-format, --vmodule, ...) changed; a restart is needed", -1)
	if err := os.WriteFile(empty, []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitLogged(t, a, "empty.yaml is empty; keeping its last pods", 2)
	jsonLog(t, a) // still JSON: the format waits for a restart
}
