package dockertools

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"

	"github.com/classic-kubelet/kubelet/pkg/await"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// engine is a stand-in for the Docker Engine API, over a real HTTP server:
// the handful of endpoints the client wrapper calls, with state (containers
// and images), Docker's status codes and messages, and the raw-stream
// framing of logs and exec. It tests the wrapper's translation of the API,
// not Docker.
type engine struct {
	t   *testing.T
	srv *httptest.Server

	mu          sync.Mutex
	containers  map[string]*docker.Container
	images      map[string]*docker.Image // by reference and by ID
	execs       map[string]int           // exec ID → exit code
	pulls       []string
	inspects    int             // image inspects answered
	resizes     []string        // "HxW" of each resize asked for
	interactive map[string]bool // exec IDs created with stdin
	hanging     map[string]bool // exec IDs of "hang": output until the client goes
	nextID      int
	stopped     chan struct{} // closed at the test's end
	resized     chan struct{} // a resize was asked for (cap 16: a test takes them)
	begun       chan struct{} // an echo session began (cap 16)
}

func newEngine(t *testing.T) (*engine, *Client) {
	t.Helper()
	e := &engine{t: t, containers: map[string]*docker.Container{}, images: map[string]*docker.Image{}, execs: map[string]int{}, interactive: map[string]bool{},
		hanging: map[string]bool{}, stopped: make(chan struct{}), resized: make(chan struct{}, 16), begun: make(chan struct{}, 16)}
	e.addImage("img:1", "sha256:img1", "app")
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() { close(e.stopped) }) // before the server closes
	c, err := NewClient("tcp://" + strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

func (e *engine) addImage(ref, id, user string) {
	img := &docker.Image{ID: id, Config: &docker.Config{User: user}, RepoTags: []string{ref}}
	e.images[ref], e.images[id] = img, img
}

var (
	rxContainer = regexp.MustCompile(`^/containers/([^/]+)(/json|/start|/stop|/logs|/exec)?$`)
	rxImage     = regexp.MustCompile(`^/images/(.+?)(/json)?$`)
	rxExec      = regexp.MustCompile(`^/exec/([^/]+)/(start|json)$`)
)

func (e *engine) fail(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func (e *engine) reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}

func (e *engine) serve(w http.ResponseWriter, r *http.Request) {
	path := regexp.MustCompile(`^/v[0-9.]+`).ReplaceAllString(r.URL.Path, "")
	if r.Header.Get("Upgrade") == "tcp" && (strings.HasSuffix(path, "/attach") || e.interactiveExec(path)) {
		e.echoSession(w, r) // holds no lock: resizes arrive while it runs
		return
	}
	if m := rxExec.FindStringSubmatch(path); m != nil && m[2] == "start" && e.isHanging(m[1]) {
		e.hangSession(w)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case path == "/system/df":
		e.reply(w, 200, map[string]any{"LayersSize": 4096, "Containers": []map[string]any{
			{"Id": "mine", "SizeRw": 100, "Labels": map[string]string{kubecontainer.LabelOwner: "n"}},
			{"Id": "theirs", "SizeRw": 900, "Labels": map[string]string{kubecontainer.LabelOwner: "other"}},
		}})
	case strings.HasSuffix(path, "/resize"):
		e.resizes = append(e.resizes, r.URL.Query().Get("h")+"x"+r.URL.Query().Get("w"))
		e.resized <- struct{}{}
		w.WriteHeader(200)
	case path == "/version":
		e.reply(w, 200, map[string]string{"ApiVersion": "1.41", "Version": "20.10.24"})
	case path == "/info":
		e.reply(w, 200, map[string]string{"DockerRootDir": "/"})
	case path == "/containers/json":
		e.list(w, r)
	case path == "/containers/create":
		e.create(w, r)
	case path == "/images/create":
		e.pull(w, r)
	case path == "/build":
		_, _ = io.Copy(io.Discard, r.Body)
		e.addImage(r.URL.Query().Get("t"), "sha256:built", "")
		e.reply(w, 200, map[string]string{"stream": "Successfully built\n"})
	case rxExec.MatchString(path):
		m := rxExec.FindStringSubmatch(path)
		if m[2] == "json" {
			e.reply(w, 200, map[string]any{"ExitCode": e.execs[m[1]], "Running": false})
			return
		}
		e.rawStream(w, r, "exec output\n")
	case rxContainer.MatchString(path):
		m := rxContainer.FindStringSubmatch(path)
		e.container(w, r, m[1], m[2])
	case rxImage.MatchString(path):
		m := rxImage.FindStringSubmatch(path)
		img := e.images[m[1]]
		switch {
		case img == nil:
			e.fail(w, 404, "No such image: "+m[1])
		case r.Method == http.MethodDelete:
			delete(e.images, m[1])
			e.reply(w, 200, []map[string]string{{"Deleted": img.ID}})
		default:
			e.inspects++
			e.reply(w, 200, img)
		}
	default:
		e.fail(w, 404, "page not found")
	}
}

func (e *engine) list(w http.ResponseWriter, r *http.Request) {
	var filters map[string][]string
	_ = json.Unmarshal([]byte(r.URL.Query().Get("filters")), &filters)
	out := []docker.APIContainers{}
	for _, c := range e.containers {
		keep := true
		for _, l := range filters["label"] {
			k, v, _ := strings.Cut(l, "=")
			keep = keep && c.Config.Labels[k] == v
		}
		if keep {
			state := "created"
			if c.State.Running {
				state = "running"
			} else if !c.State.FinishedAt.IsZero() {
				state = "exited"
			}
			out = append(out, docker.APIContainers{ID: c.ID, Names: []string{"/" + c.Name}, Labels: c.Config.Labels,
				State: state, Image: c.Config.Image, Created: c.Created.Unix()})
		}
	}
	e.reply(w, 200, out)
}

func (e *engine) create(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	var body struct {
		docker.Config
		HostConfig *docker.HostConfig
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		e.fail(w, 400, err.Error())
		return
	}
	for _, c := range e.containers {
		if c.Name == name {
			e.fail(w, 409, fmt.Sprintf(`Conflict. The container name "/%s" is already in use by container "%s".`, name, c.ID))
			return
		}
	}
	if e.images[body.Image] == nil {
		e.fail(w, 404, "No such image: "+body.Image)
		return
	}
	e.nextID++
	id := fmt.Sprintf("%064x", e.nextID)
	cfg := body.Config
	e.containers[id] = &docker.Container{ID: id, Name: name, Config: &cfg, HostConfig: body.HostConfig, Created: time.Now(),
		Image: e.images[body.Image].ID, LogPath: "/var/lib/docker/containers/" + id + "/" + id + "-json.log",
		State: docker.State{Status: "created"}}
	e.reply(w, 201, map[string]string{"Id": id})
}

func (e *engine) pull(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("fromImage") + ":" + r.URL.Query().Get("tag")
	e.pulls = append(e.pulls, ref+" auth="+r.Header.Get("X-Registry-Auth"))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	if strings.Contains(ref, "private") {
		fmt.Fprintln(w, `{"errorDetail":{"message":"pull access denied for private, repository does not exist or may require 'docker login'"},"error":"pull access denied"}`)
		return
	}
	fmt.Fprintln(w, `{"status":"Pulling from library"}`)
	e.addImage(ref, "sha256:"+strings.ReplaceAll(ref, ":", "-"), "")
}

func (e *engine) container(w http.ResponseWriter, r *http.Request, id, verb string) {
	c := e.containers[id]
	if c == nil {
		for _, cc := range e.containers {
			if cc.Name == id {
				c = cc
			}
		}
	}
	if c == nil {
		e.fail(w, 404, "No such container: "+id)
		return
	}
	switch {
	case verb == "/json":
		e.reply(w, 200, c)
	case verb == "/start":
		switch {
		case c.State.Running:
			w.WriteHeader(304)
		case len(c.Config.Cmd) > 0 && c.Config.Cmd[0] == "/no/such/binary":
			c.State.ExitCode, c.State.Error = 127, `exec: "/no/such/binary": stat /no/such/binary: no such file or directory`
			e.fail(w, 400, "failed to create shim task: OCI runtime create failed: "+c.State.Error)
		default:
			c.State.Running, c.State.Status, c.State.StartedAt, c.State.Pid = true, "running", time.Now(), 4242
			w.WriteHeader(204)
		}
	case verb == "/stop":
		if !c.State.Running {
			w.WriteHeader(304)
			return
		}
		c.State.Running, c.State.Status, c.State.FinishedAt, c.State.ExitCode = false, "exited", time.Now(), 143
		w.WriteHeader(204)
	case verb == "/logs":
		e.rawStream(w, r, "line one\nline two\n")
	case verb == "/exec":
		var body docker.CreateExecOptions
		_ = json.NewDecoder(r.Body).Decode(&body)
		execID := fmt.Sprintf("exec%d", len(e.execs)+1)
		e.execs[execID] = len(body.Cmd) // a recognisable exit code
		if body.AttachStdin {
			e.interactive[execID] = true
		}
		if len(body.Cmd) > 0 && body.Cmd[0] == "hang" {
			e.hanging[execID] = true
		}
		e.reply(w, 201, map[string]string{"Id": execID})
	case r.Method == http.MethodDelete:
		delete(e.containers, c.ID)
		w.WriteHeader(204)
	default:
		e.fail(w, 404, "page not found")
	}
}

// rawStream writes Docker's multiplexed stream: an 8-byte header (stream 1,
// big-endian length) before each stdout frame. A request asking for an
// upgrade (exec start) gets it on the hijacked connection, as from Docker.
// interactiveExec reports whether path starts an exec created with stdin.
func (e *engine) interactiveExec(path string) bool {
	m := rxExec.FindStringSubmatch(path)
	e.mu.Lock()
	defer e.mu.Unlock()
	return m != nil && m[2] == "start" && e.interactive[m[1]]
}

func (e *engine) isHanging(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hanging[id]
}

// hangSession is the output of a command that never ends, whatever its
// client does to its stdin: a frame, then nothing for as long as the
// stand-in runs (the test's end closes the session).
func (e *engine) hangSession(w http.ResponseWriter) {
	conn, buf, ok := e.upgrade(w)
	if !ok {
		return
	}
	defer conn.Close()
	_ = buf.Flush()
	_, _ = conn.Write(rawFrame(1, []byte(".")))
	<-e.stopped
}

// echoSession is a hijacked attach or exec session without a TTY: each read
// of the client's stdin comes back as a stdout frame, then "bye" on stderr
// once stdin ends.
func (e *engine) echoSession(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body) // the start options, before the raw stream
	conn, buf, ok := e.upgrade(w)
	if !ok {
		return
	}
	defer conn.Close()
	_ = buf.Flush()
	e.begun <- struct{}{}
	p := make([]byte, 512)
	for {
		n, err := buf.Read(p)
		if n > 0 {
			_, _ = conn.Write(rawFrame(1, p[:n]))
		}
		if err != nil {
			break
		}
	}
	_, _ = conn.Write(rawFrame(2, []byte("bye\n")))
}

// upgrade hijacks the connection and answers Docker's 101 for a raw stream.
func (e *engine) upgrade(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, bool) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		e.t.Errorf("hijack: %v", err)
		return nil, nil, false
	}
	fmt.Fprint(buf, "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	return conn, buf, true
}

// rawFrame is one frame of Docker's multiplexed stream (1 stdout, 2 stderr).
func rawFrame(stream byte, p []byte) []byte {
	h := make([]byte, 8, 8+len(p))
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(p)))
	return append(h, p...)
}

func (e *engine) rawStream(w http.ResponseWriter, r *http.Request, payload string) {
	frame := rawFrame(1, []byte(payload))
	if r.Header.Get("Upgrade") != "" {
		conn, buf, ok := e.upgrade(w)
		if !ok {
			return
		}
		defer conn.Close()
		_, _ = buf.Write(frame)
		_ = buf.Flush()
		return
	}
	w.Header().Set("Content-Type", "application/vnd.docker.raw-stream")
	w.WriteHeader(200)
	_, _ = w.Write(frame)
}

// An exec's timeout bounds it even when the agent may not kill its process
// (the daemon is not on this host's unix socket, as the stand-in's TCP
// endpoint): the call returns at the timeout, its session closed.
func TestExecTimeoutBoundsARemoteDaemon(t *testing.T) {
	_, c := newEngine(t)
	ctx := context.Background()
	id, err := c.Create(ctx, &kubecontainer.CreateSpec{Name: "k8s_app.1_p_ns_u_0001", Image: "img:1", Labels: map[string]string{kubecontainer.LabelOwner: "n"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, _, err := c.Exec(ctx, id, []string{"hang"}, 100*time.Millisecond)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, kubecontainer.ErrExecTimeout) {
			t.Errorf("Exec = %v, want ErrExecTimeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Exec of a command that never ends outlived its timeout of 100 ms by 10 s")
	}
	t.Logf("returned after %v", time.Since(start).Round(time.Millisecond))
}

// TestClientAgainstEngine drives the wrapper through a container's life
// against the stand-in: each call's translation of the API (labels, names,
// states, Docker's errors into the runtime's) is what is asserted.
func TestClientAgainstEngine(t *testing.T) {
	_, c := newEngine(t)
	ctx := context.Background()

	spec := &kubecontainer.CreateSpec{Name: "k8s_app.1_p_ns_u_0001", Image: "img:1", Cmd: []string{"sleep"},
		Labels: map[string]string{kubecontainer.LabelOwner: "n", kubecontainer.LabelPodUID: "u", "io.kubernetes.container.restartCount": "2"}}
	id, err := c.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := c.Create(ctx, spec); !errors.Is(err, kubecontainer.ErrNameConflict) {
		t.Errorf("second Create with the name: %v, want ErrNameConflict", err)
	}
	if err := c.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := c.Start(ctx, id); err != nil {
		t.Errorf("Start of a running container: %v, want success", err)
	}
	list, err := c.List(ctx, kubecontainer.LabelOwner, "n")
	if err != nil || len(list) != 1 || list[0].ID != id || !list[0].Running || list[0].Name != spec.Name {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if other, _ := c.List(ctx, kubecontainer.LabelOwner, "someone-else"); len(other) != 0 {
		t.Errorf("List of another owner = %+v", other)
	}
	d, err := c.Inspect(ctx, id)
	if err != nil || !d.Running || d.Labels[kubecontainer.LabelPodUID] != "u" || d.ImageID != "sha256:img1" || d.LogPath == "" {
		t.Fatalf("Inspect = %+v, %v", d, err)
	}
	if n := kubecontainer.ParseRestartCount(d.Labels); n != 2 {
		t.Errorf("restart count %d, want 2", n)
	}
	code, out, err := c.Exec(ctx, id, []string{"a", "b", "c"}, time.Minute)
	if err != nil || code != 3 || string(out) != "exec output\n" {
		t.Errorf("Exec = %d %q %v, want 3 and the output", code, out, err)
	}
	var logs strings.Builder
	if err := c.Logs(ctx, id, kubecontainer.LogOptions{TailLines: 10}, &logs); err != nil || logs.String() != "line one\nline two\n" {
		t.Errorf("Logs = %q, %v", logs.String(), err)
	}
	if err := c.Stop(ctx, id, time.Second); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := c.Stop(ctx, id, time.Second); err != nil {
		t.Errorf("Stop of a stopped container: %v, want success", err)
	}
	if d, _ := c.Inspect(ctx, id); d.Running || d.ExitCode != 143 {
		t.Errorf("after Stop: %+v", d)
	}
	if err := c.Remove(ctx, id); err != nil {
		t.Errorf("Remove: %v", err)
	}
	if err := c.Remove(ctx, id); err != nil {
		t.Errorf("Remove of a removed container: %v, want success", err)
	}
	if _, err := c.Inspect(ctx, id); !errors.Is(err, kubecontainer.ErrNotFound) {
		t.Errorf("Inspect of a removed container: %v, want ErrNotFound", err)
	}
	if err := c.Start(ctx, id); !errors.Is(err, kubecontainer.ErrNotFound) {
		t.Errorf("Start of a removed container: %v, want ErrNotFound", err)
	}

	// A command Docker cannot run: the start fails with Docker's reason,
	// and the container keeps its exit code.
	bad := *spec
	bad.Name, bad.Cmd = "k8s_bad.1_p_ns_u_0002", []string{"/no/such/binary"}
	badID, err := c.Create(ctx, &bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, badID); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("Start of a missing binary: %v", err)
	}
	if d, _ := c.Inspect(ctx, badID); d.ExitCode != 127 || d.Status != "created" || d.Error == "" {
		t.Errorf("after a failed start: %+v", d)
	}
	if _, err := c.Create(ctx, &kubecontainer.CreateSpec{Name: "k8s_x.1_p_ns_u_0003", Image: "absent:1"}); !errors.Is(err, kubecontainer.ErrImageNotFound) {
		t.Errorf("Create from an absent image: %v, want ErrImageNotFound", err)
	}
}

// An image found present is taken to stay so for presentFor only.
func TestPresentImagesExpire(t *testing.T) {
	var p presentImages
	if p.recent("a:1") {
		t.Error("an image never found is recent")
	}
	p.found("a:1")
	if !p.recent("a:1") || p.recent("b:1") {
		t.Error("a:1 just found is not recent, or b:1 is")
	}
	p.seen["a:1"] = time.Now().Add(-presentFor)
	if p.recent("a:1") {
		t.Errorf("a:1 found %v ago is still recent", presentFor)
	}
	p.found("b:1")
	if _, kept := p.seen["a:1"]; kept {
		t.Error("an expired image is kept")
	}
	p.forget()
	if p.recent("b:1") {
		t.Error("b:1 is recent after forget")
	}
}

func TestImagesAgainstEngine(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	if ok, err := c.ImagePresent(ctx, "img:1"); !ok || err != nil {
		t.Errorf("ImagePresent(img:1) = %v %v", ok, err)
	}
	if ok, err := c.ImagePresent(ctx, "absent:1"); ok || err != nil {
		t.Errorf("ImagePresent(absent:1) = %v %v, want false without error", ok, err)
	}
	if u, err := c.ImageUser(ctx, "img:1"); u != "app" || err != nil {
		t.Errorf("ImageUser = %q %v", u, err)
	}
	if err := c.PullAuth(ctx, "reg.test/app:2", &kubecontainer.Auth{Username: "u", Password: "p"}, time.Minute); err != nil {
		t.Fatalf("PullAuth: %v", err)
	}
	if len(e.pulls) != 1 || !strings.HasPrefix(e.pulls[0], "reg.test/app:2 auth=") || strings.HasSuffix(e.pulls[0], "auth=") {
		t.Errorf("pulls %v, want one with credentials", e.pulls)
	}
	if err := c.PullAuth(ctx, "reg.test/private:1", nil, time.Minute); err == nil || !strings.Contains(err.Error(), "pull access denied") {
		t.Errorf("PullAuth of a denied image: %v", err)
	}
	id, err := c.ImageID(ctx, "reg.test/app:2")
	if err != nil || id == "" {
		t.Fatalf("ImageID = %q %v", id, err)
	}
	for range 3 {
		if ok, err := c.ImagePresent(ctx, "img:1"); !ok || err != nil {
			t.Errorf("ImagePresent(img:1) again = %v %v", ok, err)
		}
	}
	if e.inspects != 3 { // ImagePresent's of img:1 once, ImageUser's and ImageID's
		t.Errorf("%d image inspects, want img:1 inspected once while found present", e.inspects)
	}
	if err := c.RemoveImage(ctx, id); err != nil {
		t.Errorf("RemoveImage: %v", err)
	}
	c.ImagePresent(ctx, "img:1")
	if e.inspects != 4 {
		t.Errorf("%d image inspects, want img:1 inspected again once an image was removed", e.inspects)
	}
	inUse, err := c.ImagesInUse(ctx)
	if err != nil || len(inUse) != 0 {
		t.Errorf("ImagesInUse = %v %v", inUse, err)
	}
	if pct, err := c.ImageFsUsage(ctx); err != nil || pct < 0 || pct > 100 {
		t.Errorf("ImageFsUsage = %d %v", pct, err)
	}
}

// A daemon that does not answer is ErrRuntimeUnavailable, whatever the call.
func TestUnavailableEngine(t *testing.T) {
	e, c := newEngine(t)
	e.srv.Close()
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"list":    func() error { _, err := c.List(ctx, kubecontainer.LabelOwner, "n"); return err },
		"inspect": func() error { _, err := c.Inspect(ctx, "x"); return err },
		"start":   func() error { return c.Start(ctx, "x") },
		"image":   func() error { _, err := c.ImagePresent(ctx, "img:1"); return err },
		"events":  func() error { _, err := c.Events(ctx); return err },
	} {
		if err := call(); !errors.Is(err, kubecontainer.ErrRuntimeUnavailable) {
			t.Errorf("%s against a closed daemon: %v, want ErrRuntimeUnavailable", name, err)
		}
	}
}

// The runtime-neutral options Docker has no field of its own for reach its
// HostConfig: seccomp and AppArmor as security options (a Localhost seccomp
// profile by content), the cgroup parent, oom_score_adj, structured mounts
// (a ':' in a path is fine there).
func TestCreateOptionsReachDocker(t *testing.T) {
	e, c := newEngine(t)
	adj := -997
	for _, tc := range []struct {
		name string
		spec kubecontainer.CreateSpec
		want func(hc *docker.HostConfig) bool
	}{
		{"seccomp unconfined", kubecontainer.CreateSpec{Seccomp: kubecontainer.SeccompProfile{Kind: kubecontainer.SeccompUnconfined}},
			func(hc *docker.HostConfig) bool { return strings.Join(hc.SecurityOpt, ",") == "seccomp=unconfined" }},
		{"seccomp localhost", kubecontainer.CreateSpec{Seccomp: kubecontainer.SeccompProfile{Kind: kubecontainer.SeccompLocalhost, Content: []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`)}},
			func(hc *docker.HostConfig) bool {
				return strings.Join(hc.SecurityOpt, ",") == `seccomp={"defaultAction":"SCMP_ACT_ALLOW"}`
			}},
		{"runtime default", kubecontainer.CreateSpec{Seccomp: kubecontainer.SeccompProfile{Kind: kubecontainer.SeccompRuntimeDefault}},
			func(hc *docker.HostConfig) bool { return len(hc.SecurityOpt) == 0 }},
		{"apparmor", kubecontainer.CreateSpec{AppArmorProfile: "k8s-deny-write"},
			func(hc *docker.HostConfig) bool {
				return strings.Join(hc.SecurityOpt, ",") == "apparmor=k8s-deny-write"
			}},
		{"cgroup parent and oom score", kubecontainer.CreateSpec{CgroupParent: "/kubepods/podu1", OOMScoreAdj: &adj},
			func(hc *docker.HostConfig) bool {
				return hc.CgroupParent == "/kubepods/podu1" && hc.OomScoreAdj == -997
			}},
		{"ports, memory without swap, log rotation", kubecontainer.CreateSpec{
			Ports:      []kubecontainer.PortMapping{{ContainerPort: 80, HostPort: 8080, HostIP: "127.0.0.1", Protocol: "tcp"}},
			Resources:  kubecontainer.Resources{Memory: 64 << 20},
			LogMaxSize: 1 << 20, NoNewPrivileges: true},
			func(hc *docker.HostConfig) bool {
				b := hc.PortBindings["80/tcp"]
				return len(b) == 1 && b[0].HostPort == "8080" && b[0].HostIP == "127.0.0.1" &&
					hc.Memory == 64<<20 && hc.MemorySwap == 64<<20 &&
					hc.LogConfig.Config["max-size"] == "1048576" && hc.LogConfig.Config["max-file"] == "1" &&
					strings.Join(hc.SecurityOpt, ",") == "no-new-privileges"
			}},
		{"mounts", kubecontainer.CreateSpec{Mounts: []kubecontainer.Mount{{Source: "/srv/a:b", Target: "/data", ReadOnly: true}}},
			func(hc *docker.HostConfig) bool {
				return len(hc.Mounts) == 1 && hc.Mounts[0].Source == "/srv/a:b" && hc.Mounts[0].Type == "bind" && hc.Mounts[0].ReadOnly
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			spec.Name, spec.Image = "k8s_"+strings.ReplaceAll(tc.name, " ", "-")+".1_p_ns_u_0001", "img:1"
			id, err := c.Create(context.Background(), &spec)
			if err != nil {
				t.Fatal(err)
			}
			e.mu.Lock()
			hc := e.containers[id].HostConfig
			e.mu.Unlock()
			if !tc.want(hc) {
				t.Errorf("HostConfig security %v, cgroup %q, oom %d, mounts %+v", hc.SecurityOpt, hc.CgroupParent, hc.OomScoreAdj, hc.Mounts)
			}
		})
	}
}

// The streaming calls carry stdin to the session and its stdout and stderr
// back apart, forward terminal sizes once the exec runs, and end when the
// runtime closes the session.
func TestStreamsAgainstEngine(t *testing.T) {
	e, c := newEngine(t)
	id, err := c.Create(context.Background(), &kubecontainer.CreateSpec{Name: "k8s_s.1_p_ns_u_0001", Image: "img:1"})
	if err != nil {
		t.Fatal(err)
	}
	sizes := make(chan kubecontainer.TerminalSize, 1)
	sizes <- kubecontainer.TerminalSize{Width: 80, Height: 24}
	var out, errOut strings.Builder
	stdin, feed := io.Pipe()
	go func() {
		// stdin ends only once the size went through, so the session is
		// still running when it is forwarded.
		_, _ = feed.Write([]byte("hello\n"))
		select {
		case <-e.resized:
		case <-time.After(await.Timeout): // the check below fails
		}
		feed.Close()
	}()
	code, err := c.ExecStream(context.Background(), id, []string{"cat", "-"}, kubecontainer.Streams{Stdin: stdin, Stdout: &out, Stderr: &errOut, Resize: sizes})
	if err != nil || code != 2 {
		t.Fatalf("ExecStream = %d, %v; want exit code 2 (the stand-in's len(cmd))", code, err)
	}
	if out.String() != "hello\n" || errOut.String() != "bye\n" {
		t.Errorf("stdout %q, stderr %q; want the echo and bye apart", out.String(), errOut.String())
	}
	e.mu.Lock()
	resizes := strings.Join(e.resizes, ",")
	e.mu.Unlock()
	if resizes != "24x80" {
		t.Errorf("resizes %q, want 24x80", resizes)
	}

	out.Reset()
	errOut.Reset()
	if err := c.Attach(context.Background(), id, kubecontainer.Streams{Stdin: strings.NewReader("typed"), Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if out.String() != "typed" || errOut.String() != "bye\n" {
		t.Errorf("attach stdout %q, stderr %q", out.String(), errOut.String())
	}

	// A session whose client is gone (ctx ended) returns without error;
	// the context ends once the session is under way, not some time after
	// the call.
	for len(e.begun) > 0 {
		<-e.begun // the sessions above, each ended
	}
	ctx, cancel := context.WithCancel(context.Background())
	blocked, _ := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- c.Attach(ctx, id, kubecontainer.Streams{Stdin: blocked, Stdout: io.Discard}) }()
	select {
	case <-e.begun:
	case <-time.After(await.Timeout):
		t.Fatal("the attach session never began")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("attach ended by its client: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("attach did not end with its context")
	}

	// So does an exec's, whose command Docker would run on: its client
	// goes once its first input came back.
	ctx, cancel = context.WithCancel(context.Background())
	stdin, feed = io.Pipe()
	defer feed.Close()
	echoed := make(chan struct{})
	go func() {
		_, err := c.ExecStream(ctx, id, []string{"cat"}, kubecontainer.Streams{Stdin: stdin, Stdout: firstWrite{echoed, new(sync.Once)}})
		done <- err
	}()
	_, _ = feed.Write([]byte("x"))
	<-echoed
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("exec ended by its client: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("exec did not end with its context")
	}
}

// firstWrite closes its channel at its first write.
type firstWrite struct {
	c    chan struct{}
	once *sync.Once
}

func (w firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.c) })
	return len(p), nil
}

// DiskUsage counts the writable layers of this owner's containers only.
func TestDiskUsageAgainstEngine(t *testing.T) {
	_, c := newEngine(t)
	du, err := c.DiskUsage(context.Background(), kubecontainer.LabelOwner, "n")
	if err != nil {
		t.Fatal(err)
	}
	if du.Images != 4096 || du.RootDir != "/" || len(du.Writable) != 1 || du.Writable["mine"] != 100 {
		t.Errorf("DiskUsage = %+v, want images 4096, root /, only mine=100", du)
	}
}
