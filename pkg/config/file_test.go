package config

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
)

func TestMain(m *testing.M) {
	// Every goroutine a test starts must have stopped when it returns.
	goleak.VerifyTestMain(m)
}

// recordingSink keeps every snapshot and error it is sent.
type recordingSink struct {
	mu        sync.Mutex
	snapshots [][]*v1.Pod
	errs      []string
	notify    chan struct{}
}

func newSink() *recordingSink { return &recordingSink{notify: make(chan struct{}, 100)} }

func (s *recordingSink) Set(_ context.Context, _ string, pods []*v1.Pod) {
	s.mu.Lock()
	s.snapshots = append(s.snapshots, pods)
	s.mu.Unlock()
	s.notify <- struct{}{}
}

func (s *recordingSink) SetError(_ string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.errs = append(s.errs, "")
		return
	}
	s.errs = append(s.errs, err.Error())
}

// last returns the names of the last snapshot's pods and how many snapshots
// were sent.
func (s *recordingSink) last() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.snapshots) == 0 {
		return "<none>", 0
	}
	var names []string
	for _, p := range s.snapshots[len(s.snapshots)-1] {
		names = append(names, p.Name+":"+p.Spec.Containers[0].Image)
	}
	sort.Strings(names)
	return strings.Join(names, ","), len(s.snapshots)
}

func (s *recordingSink) lastErr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) == 0 {
		return ""
	}
	return s.errs[len(s.errs)-1]
}

func manifest(name, image string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec: {containers: [{name: c, image: '" + image + "'}]}\n"
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFileSourceLastGoodPerFile(t *testing.T) {
	dir := t.TempDir()
	sink := newSink()
	s := NewFileSource(dir, "node", time.Hour, sink)
	ctx := context.Background()
	type stepT struct {
		name    string
		do      func()
		want    string
		wantErr string
	}
	steps := []stepT{
		{"good files", func() { write(t, dir, "a.yaml", manifest("a", "i:1")); write(t, dir, "b.yaml", manifest("b", "i:1")) }, "a:i:1,b:i:1", ""},
		{"ignored names", func() {
			write(t, dir, ".hidden.yaml", manifest("h", "i:1"))
			write(t, dir, "a.yaml~", manifest("t", "i:1"))
			write(t, dir, "x.swp", "junk")
			write(t, dir, "y.bak", "junk")
			write(t, dir, "z.tmp", "junk")
		}, "a:i:1,b:i:1", ""},
		{"broken file keeps its last good pods", func() {
			write(t, dir, "a.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i, bogus: 1}]}\n")
		}, "a:i:1,b:i:1", "a.yaml: document 1"},
		{"empty file (being written) keeps its last pods, no error", func() { write(t, dir, "a.yaml", "") }, "a:i:1,b:i:1", "-"},
		{"an oversized file is refused naming the limit", func() {
			write(t, dir, "f.yaml", manifest("f", "i:1")+"\n#"+strings.Repeat("x", MaxManifestSize))
		}, "a:i:1,b:i:1", "f.yaml: 10485"},
		{"fixed file applies", func() { os.Remove(filepath.Join(dir, "f.yaml")); write(t, dir, "a.yaml", manifest("a", "i:2")) }, "a:i:2,b:i:1", ""},
		{"a new broken file adds nothing", func() { write(t, dir, "c.yaml", "kind: Pod\n") }, "a:i:2,b:i:1", "c.yaml"},
		{"deleted file removes its pods", func() { os.Remove(filepath.Join(dir, "b.yaml")); os.Remove(filepath.Join(dir, "c.yaml")) }, "a:i:2", ""},
		{"same pod in two files: first file wins", func() { write(t, dir, "z.yaml", manifest("a", "i:9")) }, "a:i:2", "z.yaml: pod default/a ignored: already declared in"},
		{"explicit empty list means zero pods", func() {
			os.Remove(filepath.Join(dir, "z.yaml"))
			write(t, dir, "a.yaml", "apiVersion: v1\nkind: List\nitems: []\n")
		}, "", ""},
		{"missing directory keeps everything", func() {
			write(t, dir, "a.yaml", manifest("a", "i:3"))
			s.read(ctx)
			os.RemoveAll(dir)
		}, "a:i:3", "no such file or directory"},
		{"directory replaced by an invalid file keeps everything", func() {
			if err := os.WriteFile(dir, []byte("not: a pod\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "a:i:3", "no longer a directory"},
	}
	for _, st := range steps {
		st.do()
		s.read(ctx)
		got, _ := sink.last()
		if got != st.want {
			t.Errorf("%s: snapshot %q, want %q", st.name, got, st.want)
		}
		if st.wantErr == "-" && sink.lastErr() != "" {
			t.Errorf("%s: error %q, want none", st.name, sink.lastErr())
		}
		if st.wantErr != "" && st.wantErr != "-" && !strings.Contains(sink.lastErr(), st.wantErr) {
			t.Errorf("%s: last error %q, want it to contain %q", st.name, sink.lastErr(), st.wantErr)
		}
	}
}

func TestFileSourceUnchangedSendsNothing(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", manifest("a", "i:1"))
	sink := newSink()
	s := NewFileSource(dir, "node", time.Hour, sink)
	s.read(context.Background())
	s.read(context.Background())
	if _, n := sink.last(); n != 1 {
		t.Errorf("%d snapshots for an unchanged directory, want 1", n)
	}
}

// A file that vanishes between the listing and its reading (a pod removed
// while another is added) is gone from a directory, not a broken file whose
// pods are kept; a single manifest file that vanishes keeps its pods.
func TestFileSourceFileRemovedWhileReading(t *testing.T) {
	for _, tc := range []struct {
		name        string
		single      bool
		wantPresent bool
	}{
		{"directory", false, false},
		{"single file", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "a.yaml", manifest("a", "i:1"))
			path := dir
			if tc.single {
				path = filepath.Join(dir, "a.yaml")
			}
			s := NewFileSource(path, "node", time.Hour, newSink())
			s.read(context.Background())
			os.Remove(filepath.Join(dir, "a.yaml"))
			st := s.files[filepath.Join(dir, "a.yaml")]
			if got := s.readFile(filepath.Join(dir, "a.yaml")); got != tc.wantPresent {
				t.Errorf("readFile of the vanished file = %v, want %v", got, tc.wantPresent)
			}
			if tc.wantPresent && (st.err == nil || len(st.pods) != 1) {
				t.Errorf("vanished single file: error %v, %d pods kept; want an error and its pod kept", st.err, len(st.pods))
			}
		})
	}
}

func TestFileSourceSingleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "only.yaml")
	write(t, dir, "only.yaml", manifest("only", "i:1"))
	write(t, dir, "other.yaml", manifest("other", "i:1"))
	sink := newSink()
	s := NewFileSource(path, "node", time.Hour, sink)
	s.read(context.Background())
	if got, _ := sink.last(); got != "only:i:1" {
		t.Errorf("snapshot %q, want only the named file's pod", got)
	}
	os.Remove(path)
	s.read(context.Background())
	if got, n := sink.last(); got != "only:i:1" || n != 1 {
		t.Errorf("missing single file changed the snapshot to %q (%d sent)", got, n)
	}
	if !strings.Contains(sink.lastErr(), "only.yaml") {
		t.Errorf("missing single file not reported: %q", sink.lastErr())
	}
}

// A file renamed into the watched directory is picked up from the file
// notification, long before the periodic re-read.
func TestFileSourceWatchesDirectory(t *testing.T) {
	dir := t.TempDir()
	sink := newSink()
	s := NewFileSource(dir, "node", time.Hour, sink)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitSnapshot := func(want string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			if got, _ := sink.last(); got == want {
				return
			}
			select {
			case <-sink.notify:
			case <-deadline:
				got, _ := sink.last()
				t.Fatalf("snapshot %q, want %q", got, want)
			}
		}
	}
	waitSnapshot("")
	tmp := filepath.Join(dir, ".web.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(manifest("web", "i:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	waitSnapshot("web:i:1")
	write(t, dir, "web.yaml", manifest("web", "i:2")) // in-place write, debounced
	waitSnapshot("web:i:2")
	os.Remove(filepath.Join(dir, "web.yaml"))
	waitSnapshot("")
}

// A FIFO (or any non-regular file) swapped in for a manifest is refused at
// once: the open does not block and the descriptor is checked.
func TestReadManifestRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pod.yaml")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readManifest(p)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("readManifest(FIFO) = %v, want refused as not a regular file", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("readManifest blocked on a FIFO")
	}
}

// An edit that changes a pod's resources so that its QoS class changes is
// refused, as the API server refuses such a resize: the file keeps its
// last good pod. One that keeps the class is taken.
func TestFileSourceRefusesQoSChangingResize(t *testing.T) {
	dir := t.TempDir()
	sink := newSink()
	s := NewFileSource(dir, "node", time.Hour, sink)
	ctx := context.Background()
	withRes := func(image, res string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: '" + image + "', resources: " + res + "}]}\n"
	}
	for _, st := range []struct {
		name, content, want, wantErr string
	}{
		{"burstable", withRes("i:1", "{requests: {cpu: 100m}, limits: {cpu: 200m}}"), "a:i:1", "-"},
		{"still burstable: taken", withRes("i:2", "{requests: {cpu: 100m}, limits: {cpu: 400m}}"), "a:i:2", "-"},
		{"guaranteed: refused", withRes("i:3", "{limits: {cpu: 400m, memory: 64Mi}}"), "a:i:2",
			"a.yaml: pod default/a: spec: Forbidden: Pod QOS Class may not change as a result of resizing (keeping its last good 1 pod)"},
	} {
		write(t, dir, "a.yaml", st.content)
		s.read(ctx)
		if got, _ := sink.last(); got != st.want {
			t.Errorf("%s: snapshot %q, want %q", st.name, got, st.want)
		}
		switch {
		case st.wantErr == "-" && sink.lastErr() != "":
			t.Errorf("%s: error %q, want none", st.name, sink.lastErr())
		case st.wantErr != "-" && !strings.Contains(sink.lastErr(), st.wantErr):
			t.Errorf("%s: last error %q, want %q", st.name, sink.lastErr(), st.wantErr)
		}
	}
}
