package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// peer is another way a user could run the same pods, measured beside the
// agent in the same rounds.
type peer struct {
	name string
	// up creates and starts the named pods and returns once they run.
	up func(names []string) error
	// down removes what up made.
	down func(names []string)
}

// peers returns the peers installed on this machine; one that is installed
// but cannot run here is reported in the log and left out.
func (h *Harness) peers() []*peer {
	var out []*peer
	if _, err := exec.LookPath("podman"); err == nil {
		if p, err := h.podmanPeer(); err != nil {
			h.logf("podman is installed but cannot run the pods: %v", err)
		} else {
			out = append(out, p)
		}
	}
	if _, err := exec.LookPath("docker-compose"); err == nil {
		out = append(out, h.composePeer())
	}
	return out
}

// peerTimeout bounds one peer command: docker-compose (v1) was seen to hang
// for good halfway through `up` of 100 pods, which stalled the whole run.
const peerTimeout = 5 * time.Minute

func run(env []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer in %v", peerTimeout)
	}
	if err != nil {
		// The output's last lines say why; docker-compose prints one per container before.
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.Join(lines[max(0, len(lines)-3):], " / "))
	}
	return nil
}

// podmanPeer runs the manifests with `podman kube play`. Podman keeps its
// own image store, so the test image is copied into it; its default ulimits
// exceed this kind of machine's hard limits (runc then fails to start
// anything), so a containers.conf of the harness's own sets them below.
func (h *Harness) podmanPeer() (*peer, error) {
	var nofile, nproc syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile)
	_ = syscall.Getrlimit(6 /* RLIMIT_NPROC */, &nproc)
	conf := filepath.Join(h.dir, "containers.conf")
	nf, np := min(nofile.Max/2, 16384), min(nproc.Max/2, 4096)
	if err := os.WriteFile(conf, fmt.Appendf(nil, "[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=%d:%d\"]\n",
		nf, nf, np, np), 0o644); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "CONTAINERS_CONF="+conf)
	if err := run(env, "sh", "-c", "docker save "+testImage+" | podman load"); err != nil {
		return nil, err
	}
	file := func(names []string) string {
		var docs []string
		for _, n := range names {
			docs = append(docs, podManifest("pm-"+h.run+"-"+n))
		}
		f := filepath.Join(h.dir, "podman-"+names[0]+".yaml")
		_ = os.WriteFile(f, []byte(strings.Join(docs, "---\n")), 0o644)
		return f
	}
	p := &peer{
		name: "podman kube play",
		up:   func(names []string) error { return run(env, "podman", "kube", "play", file(names)) },
		down: func(names []string) {
			if err := run(env, "podman", "kube", "down", file(names)); err != nil {
				h.logf("%v", err)
			}
		},
	}
	// The first play builds podman's own pause image: not part of a round.
	warm := []string{"warmup"}
	err := p.up(warm)
	p.down(warm) // also what a failed play left behind
	if err != nil {
		return nil, err
	}
	return p, nil
}

// composePeer runs the same containers with `docker-compose up`: per pod, a
// pause service on Docker's default bridge and the app sharing its network.
func (h *Harness) composePeer() *peer {
	project := func(names []string) string { return "bench" + h.run + strings.ReplaceAll(names[0], "-", "") }
	file := func(names []string) string {
		var b bytes.Buffer
		b.WriteString("version: \"2.4\"\nservices:\n")
		for _, n := range names {
			fmt.Fprintf(&b, `  %[1]s-pod:
    image: %[2]s
    hostname: %[1]s
    network_mode: bridge
    ipc: shareable
    cpu_shares: 2
    labels: {%[4]s: "%[5]s"}
  %[1]s-app:
    image: %[3]s
    command: ["/testserver"]
    network_mode: "service:%[1]s-pod"
    cpu_shares: 2
    labels: {%[4]s: "%[5]s"}
    depends_on: [%[1]s-pod]
`, n, pauseImage, testImage, benchLabel, h.run)
		}
		f := filepath.Join(h.dir, "compose-"+names[0]+".yaml")
		_ = os.WriteFile(f, b.Bytes(), 0o644)
		return f
	}
	env := os.Environ()
	return &peer{
		name: "docker-compose up",
		up: func(names []string) error {
			return run(env, "docker-compose", "-p", project(names), "-f", file(names), "up", "-d")
		},
		down: func(names []string) {
			if err := run(env, "docker-compose", "-p", project(names), "-f", file(names), "down", "-t", "1"); err != nil {
				h.logf("%v", err)
			}
		},
	}
}
