package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/classic-kubelet/kubelet/test/etcdtest"
)

// cutProxy stands between an agent and one etcd member: it forwards, or
// resets every connection, or silently drops every byte.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	mode  string // "pass", "reset", "drop"
	conns map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: strings.TrimPrefix(target, "http://"), mode: "pass", conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.set("reset") })
	go p.serve()
	return p
}

func (p *cutProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
	if mode == "reset" {
		for c := range p.conns {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			c.Close()
			delete(p.conns, c)
		}
	}
}

func (p *cutProxy) current() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

func (p *cutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		switch p.current() {
		case "reset":
			_ = in.(*net.TCPConn).SetLinger(0)
			in.Close()
			continue
		case "drop":
			go func() { _, _ = io.Copy(io.Discard, in) }() // never answered
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = true, true
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe forwards while the proxy passes, drops bytes while it drops.
func (p *cutProxy) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && p.current() == "pass" {
			if _, werr := to.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			from.Close()
			to.Close()
			return
		}
	}
}

type fleetAgent struct {
	*agent
	proxies []*cutProxy
}

// leaseHolder reads the node's lease key: its value and lease ("" if absent).
func leaseHolder(t *testing.T, cl *clientv3.Client, prefix, node string) (string, int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, prefix+"/"+node+"/lease")
	if err != nil || len(resp.Kvs) == 0 {
		return "", 0
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].Lease
}

type podReport struct {
	Status struct {
		Phase             string `json:"phase"`
		ContainerStatuses []struct {
			Name         string `json:"name"`
			RestartCount int    `json:"restartCount"`
			ContainerID  string `json:"containerID"`
		} `json:"containerStatuses"`
	} `json:"status"`
	SpecHash string `json:"specHash"`
}

func podStatusKey(cl *clientv3.Client, prefix, node, pod string) (podReport, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var r podReport
	resp, err := cl.Get(ctx, prefix+"/"+node+"/pods/default/"+pod)
	if err != nil || len(resp.Kvs) == 0 || json.Unmarshal(resp.Kvs[0].Value, &r) != nil {
		return r, false
	}
	return r, true
}

// Three agents and a 3-member etcd cluster of real etcd processes: pods
// assigned through etcd run and report back; the agents ride out a leader
// failover, an agent's kill -9 and restart, and cuts between an agent and
// every etcd member (reset and silent drop, shorter and longer than the
// lease); a second agent cannot take a live agent's node name.
func TestFleet(t *testing.T) {
	const ttl = 6 * time.Second
	cluster := etcdtest.Start(t, 3, "--heartbeat-interval", "100", "--election-timeout", "1000")
	cl := cluster.Client()
	defer cl.Close()
	prefix := "/fleet-" + cluster.Token
	var agents []*fleetAgent
	for range 3 {
		var proxies []*cutProxy
		var eps []string
		for _, m := range cluster.Members {
			p := newCutProxy(t, m.ClientURL)
			proxies = append(proxies, p)
			eps = append(eps, p.url())
		}
		a := startAgent(t, "--etcd-servers", strings.Join(eps, ","), "--etcd-prefix", prefix,
			"--node-lease-duration", ttl.String(), "--node-lease-renew-interval", "2s", "--port", "0")
		agents = append(agents, &fleetAgent{agent: a, proxies: proxies})
	}
	put := func(key, value string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cl.Put(ctx, key, value); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	for _, a := range agents {
		waitFor(t, 15*time.Second, func() (bool, string) {
			v, _ := leaseHolder(t, cl, prefix, a.node)
			return v != "", a.node + " holds no lease"
		})
	}

	// Assignment → running → the status key says Running.
	var worst time.Duration
	for i, a := range agents {
		start := time.Now()
		put(prefix+"/"+a.node+"/kubelet", "["+simplePod(fmt.Sprintf("f%d", i), "1")+"]")
		waitFor(t, 20*time.Second, func() (bool, string) {
			r, ok := podStatusKey(cl, prefix, a.node, fmt.Sprintf("f%d", i))
			return ok && r.Status.Phase == "Running", fmt.Sprintf("%s: status key %+v", a.node, r)
		})
		worst = max(worst, time.Since(start))
	}
	t.Logf("assignment written → status key Running: at most %v", worst.Round(10*time.Millisecond))
	// Typically about 1 s: the start, then one status round. The bound is
	// 3 s, not the 2 s aimed at: the agents' first disk measurement at
	// start (docker system df) can slow the merger's checkpoint fsync,
	// which comes before a pod is handed on, by most of a second here.
	if worst > 3*time.Second {
		t.Errorf("a pod assigned through etcd took %v to show Running in its status key, want ≤ 3 s", worst)
	}
	// etcdctl reads what an operator reads.
	out, err := exec.Command("etcdctl", "--endpoints", strings.Join(cluster.Endpoints(), ","), "get", "--prefix", "--keys-only",
		prefix+"/"+agents[0].node+"/").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "/lease") || !strings.Contains(string(out), "/node") || !strings.Contains(string(out), "/pods/default/f0") {
		t.Errorf("etcdctl get --prefix: %v\n%s", err, out)
	}
	before := map[string]string{}
	for i, a := range agents {
		before[a.node] = a.running(fmt.Sprintf("f%d", i))["server"].ID
	}

	// Leader failover: SIGKILL the leader, restart it as a member of the
	// existing cluster.
	leader := cluster.Leader(cl)
	if leader == nil {
		t.Fatal("no etcd leader")
	}
	cluster.Kill(leader)
	var failover time.Time
	waitFor(t, 15*time.Second, func() (bool, string) {
		if l := cluster.Leader(cl); l != nil {
			failover = time.Now()
			return true, ""
		}
		return false, "no new leader"
	})
	cluster.Restart(leader)
	// A container killed after the failover reaches its status key.
	victim := agents[0]
	if err := dockerc.KillContainer(docker.KillContainerOptions{ID: before[victim.node], Signal: docker.SIGKILL}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		r, _ := podStatusKey(cl, prefix, victim.node, "f0")
		return len(r.Status.ContainerStatuses) == 1 && r.Status.ContainerStatuses[0].RestartCount == 1 && r.Status.Phase == "Running",
			fmt.Sprintf("status key after the kill: %+v", r)
	})
	t.Logf("container killed after the failover: in its status key %v after the new leader", time.Since(failover).Round(10*time.Millisecond))
	// Past the TTL (etcd's new leader extends every lease by it) and two
	// renewals more: a lease not renewed across the failover is gone.
	time.Sleep(time.Until(failover.Add(ttl + 4*time.Second)))
	for i, a := range agents {
		if v, _ := leaseHolder(t, cl, prefix, a.node); v == "" {
			t.Errorf("%s: lease key gone %v after the failover", a.node, ttl+4*time.Second)
		}
		if i > 0 && a.running(fmt.Sprintf("f%d", i))["server"].ID != before[a.node] {
			t.Errorf("%s: its pod's container was replaced over the failover", a.node)
		}
	}

	// kill -9 an agent: its lease goes within TTL + 5 s, its pod stays;
	// restarted, it takes the name back and recreates nothing.
	dead := agents[1]
	_, oldLease := leaseHolder(t, cl, prefix, dead.node)
	dead.stop(syscall.SIGKILL)
	died := time.Now()
	waitFor(t, ttl+5*time.Second, func() (bool, string) {
		v, _ := leaseHolder(t, cl, prefix, dead.node)
		return v == "", "lease key still there after the agent's kill -9"
	})
	t.Logf("kill -9: lease key gone %v after the agent died (TTL %v)", time.Since(died).Round(100*time.Millisecond), ttl)
	if id := dead.running("f1")["server"].ID; id != before[dead.node] {
		t.Errorf("the dead agent's pod did not keep running (%s)", id)
	}
	// A status key left stale meanwhile (a pod assigned to no one) goes.
	put(prefix+"/"+dead.node+"/pods/default/stale", `{"status":{"phase":"Running"}}`)
	dead.start()
	waitFor(t, 15*time.Second, func() (bool, string) {
		v, id := leaseHolder(t, cl, prefix, dead.node)
		_, stale := podStatusKey(cl, prefix, dead.node, "stale")
		return v != "" && id != oldLease && !stale, fmt.Sprintf("restarted agent: lease %q, stale key present %v", v, stale)
	})
	dead.waitRounds(3)
	if id := dead.running("f1")["server"].ID; id != before[dead.node] {
		t.Errorf("the restarted agent recreated its pod's container")
	}

	// Cuts between one agent and every etcd member.
	cut := agents[2]
	for _, c := range []struct {
		mode string
		d    time.Duration
	}{{"reset", ttl - 2*time.Second}, {"drop", ttl + 9*time.Second}} {
		for _, p := range cut.proxies {
			p.set(c.mode)
		}
		cutAt := time.Now()
		// Made during the cut: a new pod for the agent, and a stale key.
		put(prefix+"/"+cut.node+"/kubelet", "["+simplePod("f2", "1")+","+simplePod("g2-"+c.mode, "1")+"]")
		put(prefix+"/"+cut.node+"/pods/default/stale-"+c.mode, `{"status":{"phase":"Running"}}`)
		time.Sleep(time.Until(cutAt.Add(c.d)))
		if id := cut.running("f2")["server"].ID; id != before[cut.node] {
			t.Errorf("%s cut: the agent's pod was touched", c.mode)
		}
		for _, p := range cut.proxies {
			p.set("pass")
		}
		healed := time.Now()
		got := cut.waitRunning("g2-"+c.mode, "server")
		ran := time.Since(healed)
		// Applied: the agent created the pod's first container. What the
		// start takes after that is Docker's (over 1 s on a slow VM).
		infra, err := dockerc.InspectContainerWithOptions(docker.InspectContainerOptions{ID: got["POD"].ID})
		if err != nil {
			t.Fatal(err)
		}
		took := infra.Created.Sub(healed)
		t.Logf("%s cut of %v: the change made during it was applied %v after healing, ran %v after", c.mode, c.d,
			took.Round(10*time.Millisecond), ran.Round(10*time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("%s cut: the change made during it applied %v after healing, want ≤ 2 s", c.mode, took)
		}
		waitFor(t, 15*time.Second, func() (bool, string) {
			_, stale := podStatusKey(cl, prefix, cut.node, "stale-"+c.mode)
			r, ok := podStatusKey(cl, prefix, cut.node, "g2-"+c.mode)
			v, _ := leaseHolder(t, cl, prefix, cut.node)
			return !stale && ok && r.Status.Phase == "Running" && v != "",
				fmt.Sprintf("after the %s cut: stale key %v, new pod's key %+v, lease %q", c.mode, stale, r, v)
		})
	}
	// The lease is this agent's own again.
	if v, _ := leaseHolder(t, cl, prefix, cut.node); !strings.Contains(v, `"pid":`) {
		t.Errorf("lease value %q", v)
	}

	// Another agent (another root dir; a mount namespace of its own so the
	// host's node lock does not stop it first) cannot take a live name.
	second := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mkdir -p /run/classic-kubelet && mount -t tmpfs tmpfs /run/classic-kubelet && exec "$0" "$@"`,
		agentBinary, "--hostname-override", agents[0].node, "--root-dir", t.TempDir(),
		"--etcd-servers", strings.Join(cluster.Endpoints(), ","), "--etcd-prefix", prefix, "--port", "0", "--read-only-port", "0", "--healthz-port", "0")
	done := make(chan struct{})
	var output []byte
	go func() { output, err = second.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = second.Process.Kill()
		<-done
		t.Fatalf("a second agent with a live node name kept running:\n%s", tail(string(output), 20))
	}
	if err == nil || !strings.Contains(string(output), "is held in etcd by") {
		t.Errorf("second agent with %s: %v\n%s", agents[0].node, err, tail(string(output), 20))
	}

	// An agent whose lease lapsed and whose name someone else took: it
	// writes nothing, says so on /healthz, and its pod runs on.
	loser := agents[0]
	// The new holder's value goes in first (a put without a lease detaches
	// the key from the agent's), then the agent's lease is revoked: the key
	// never disappears, so the agent cannot win the name back in between,
	// as it rightly would if the key were absent at its next renewal.
	_, id := leaseHolder(t, cl, prefix, loser.node)
	put(prefix+"/"+loser.node+"/lease", `{"instanceID":"usurper","hostname":"elsewhere"}`)
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, _ = cl.Revoke(rctx, clientv3.LeaseID(id))
	rcancel()
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz/nodename", loser.healthzPort)
	waitFor(t, 15*time.Second, func() (bool, string) {
		code, body := httpGet(healthz)
		return code == 500 && strings.Contains(body, "usurper"), fmt.Sprintf("/healthz/nodename %d %s", code, body)
	})
	// Evidence of two more claim attempts after it saw the takeover.
	seen := strings.Count(loser.log(), "Not writing to etcd")
	waitFor(t, 15*time.Second, func() (bool, string) {
		n := strings.Count(loser.log(), "Not writing to etcd")
		return n >= seen+2, fmt.Sprintf("%d more refused claims logged", n-seen)
	})
	if v, _ := leaseHolder(t, cl, prefix, loser.node); !strings.Contains(v, "usurper") {
		t.Errorf("the agent overwrote the new holder's lease key: %s", v)
	}
	if len(loser.running("f0")) == 0 {
		t.Error("the agent that lost its name stopped its pod")
	}
}
