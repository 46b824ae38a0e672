package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// writeDebounce coalesces the burst of write (or removal) events one save
// (or one `rm -rf`) produces, so a file is parsed once it is whole rather
// than at every partial write, and a directory removed is seen as removed.
const writeDebounce = 100 * time.Millisecond

// Sink receives a source's complete snapshots and its failures.
type Sink interface {
	Set(ctx context.Context, source string, pods []*v1.Pod)
	SetError(source string, err error)
}

// fileState is the last reading of one manifest file.
type fileState struct {
	modTime time.Time
	size    int64
	pods    []*v1.Pod // last good: kept while the file fails to parse
	err     error     // of the last reading, if it failed
}

// FileSource watches a directory of manifests (or a single manifest file)
// and sends the pods of all its files as one snapshot. The unit of "last
// good" is the file: a file that is empty or invalid keeps the pods it last
// produced; a deleted file drops them. A directory that is missing or
// unreadable keeps the whole last snapshot.
type FileSource struct {
	path   string
	node   string
	period time.Duration
	sink   Sink

	files   map[string]*fileState // by file name; owned by Run's goroutine
	isDir   *bool                 // what path was when first read: a change of kind keeps the pods
	last    []*v1.Pod
	sent    bool
	lastErr string
	read1   chan struct{} // closed after the first reading
}

// NewFileSource returns a source for path, re-read every period besides the
// file-system notifications.
func NewFileSource(path, node string, period time.Duration, sink Sink) *FileSource {
	return &FileSource{path: path, node: node, period: period, sink: sink, files: map[string]*fileState{}, read1: make(chan struct{})}
}

// FirstRead is closed once the source has read its path for the first time
// (whatever it found).
func (s *FileSource) FirstRead() <-chan struct{} { return s.read1 }

// Run watches and reads until ctx is cancelled.
func (s *FileSource) Run(ctx context.Context) {
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		klog.Errorf("File source %s: no file notifications, re-reading every %v: %v", s.path, s.period, err)
	} else {
		defer watcher.Close()
	}
	watching := ""
	watch := func() {
		if watcher == nil {
			return
		}
		dir := s.watchDir()
		if dir == watching {
			return
		}
		if err := watcher.Add(dir); err != nil {
			klog.V(2).Infof("File source: watch %s: %v (retrying every %v)", dir, err, s.period)
			return
		}
		watching = dir
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if watcher != nil {
		events, errs = watcher.Events, watcher.Errors
	}

	ticker := time.NewTicker(s.period)
	defer ticker.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()

	watch()
	s.read(ctx)
	close(s.read1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			watch()
			s.read(ctx)
		case <-debounce.C:
			s.read(ctx)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if !s.relevant(ev.Name) {
				continue
			}
			if ev.Op&fsnotify.Create != 0 {
				// A file renamed into place is whole: read it at once.
				debounce.Stop()
				s.read(ctx)
			} else {
				// Writes come in bursts; and removals too: `rm -rf` of the
				// directory deletes its files first, and reading between
				// those and the directory's own removal would take each
				// file's removal as meant, not the directory's vanishing.
				debounce.Reset(writeDebounce)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			klog.Errorf("File source %s: watch: %v", s.path, err)
		}
	}
}

// watchDir is the directory to watch: path itself, or a single file's parent
// (watching the parent also sees the file being replaced by a rename).
func (s *FileSource) watchDir() string {
	if fi, err := os.Stat(s.path); err == nil && !fi.IsDir() {
		return filepath.Dir(s.path)
	}
	return s.path
}

// relevant reports whether an event on name can change the snapshot.
func (s *FileSource) relevant(name string) bool {
	if fi, err := os.Stat(s.path); err == nil && !fi.IsDir() {
		return filepath.Clean(name) == filepath.Clean(s.path)
	}
	return !ignoredFile(filepath.Base(name))
}

// ignoredFile reports hidden files and editor leftovers.
func ignoredFile(name string) bool {
	if strings.HasPrefix(name, ".") {
		return true
	}
	for _, suffix := range []string{"~", ".swp", ".swx", ".bak", ".tmp"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// read re-reads the manifests and sends the snapshot if it changed.
func (s *FileSource) read(ctx context.Context) {
	names, err := s.list()
	if err != nil {
		s.fail(fmt.Errorf("file source %s: %w", s.path, err))
		return
	}
	seen := map[string]bool{}
	for _, name := range names {
		seen[name] = s.readFile(name)
	}
	for name := range s.files {
		if !seen[name] {
			klog.Infof("File source: %s removed", name)
			delete(s.files, name)
		}
	}

	var pods []*v1.Pod
	owner := map[string]string{}
	var problems []string
	for _, name := range names {
		st, ok := s.files[name]
		if !ok {
			continue // removed since the listing
		}
		if st.err != nil {
			problems = append(problems, st.err.Error())
		}
		for _, pod := range st.pods {
			key := api.Key(pod)
			if first, dup := owner[key]; dup {
				problems = append(problems, fmt.Sprintf("%s: pod %s ignored: already declared in %s", name, key, first))
				continue
			}
			owner[key] = name
			pods = append(pods, pod)
		}
	}
	if msg := strings.Join(problems, "; "); msg != "" {
		s.sink.SetError(api.SourceFile, errors.New(msg))
		if msg != s.lastErr {
			for _, p := range problems {
				klog.Errorf("File source: %s", p)
			}
		}
		s.lastErr = msg
	} else {
		s.sink.SetError(api.SourceFile, nil)
		s.lastErr = ""
	}
	if s.sent && podsEqual(s.last, pods) {
		return
	}
	s.last, s.sent = pods, true
	s.sink.Set(ctx, api.SourceFile, pods)
}

// list returns the manifest file paths the source consists of, sorted. A
// path that was a directory and is now something else (or the reverse) is
// an error: a file put where the manifest directory was must not replace
// every pod with its own.
func (s *FileSource) list() ([]string, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return nil, err
	}
	if s.isDir == nil {
		isDir := fi.IsDir()
		s.isDir = &isDir
	}
	switch {
	case *s.isDir && !fi.IsDir():
		return nil, errors.New("was a directory of manifests and is no longer a directory")
	case !*s.isDir && fi.IsDir():
		return nil, errors.New("was a manifest file and is now a directory")
	case !fi.IsDir():
		return []string{s.path}, nil
	}
	entries, err := os.ReadDir(s.path)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if ignoredFile(e.Name()) {
			continue
		}
		full := filepath.Join(s.path, e.Name())
		info, err := os.Stat(full) // follows symlinks
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		names = append(names, full)
	}
	sort.Strings(names)
	return names, nil
}

// readFile parses one file unless it is unchanged since the last reading.
// It reports false for a file of the directory removed since the listing:
// it is gone as if the listing had not found it (a pod removed while
// another is added is not kept for a reading more).
func (s *FileSource) readFile(name string) bool {
	st, ok := s.files[name]
	if !ok {
		st = &fileState{}
		s.files[name] = st
	}
	keeping := func(err error) error {
		if len(st.pods) == 0 {
			return fmt.Errorf("%s: %w", name, err)
		}
		return fmt.Errorf("%s: %w (keeping its last good %s)", name, err, plural(len(st.pods), "pod"))
	}
	info, err := os.Stat(name)
	if err == nil && ok && info.ModTime().Equal(st.modTime) && info.Size() == st.size {
		return true
	}
	var data []byte
	if err == nil {
		st.modTime, st.size = info.ModTime(), info.Size()
		data, err = readManifest(name)
	}
	if errors.Is(err, fs.ErrNotExist) && *s.isDir {
		return false
	}
	if err != nil {
		st.err = keeping(err)
		return true
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		// Being written (`cat > file` truncates first), or emptied on
		// purpose: its pods stay until it says otherwise.
		st.err = nil
		klog.V(2).Infof("File source: %s is empty; keeping its last pods (%d)", name, len(st.pods))
		return true
	}
	pods, ignored, err := api.Parse(data, s.node, api.SourceFile)
	if err != nil {
		st.err = keeping(err)
		return true
	}
	if err := resizeErrors(st.pods, pods); err != nil {
		st.err = keeping(err)
		return true
	}
	for _, f := range ignored {
		klog.Infof("File source: %s: %s is ignored by this agent", name, f)
	}
	st.pods, st.err = pods, nil
	return true
}

// resizeErrors refuses an edit of a file's pods that would change a pod's
// QoS class (the same pod: its UID) by changing its resources, or a
// container's extended resources, as the API server refuses such a
// resize: the file is invalid, and its last good pods stay.
func resizeErrors(old, pods []*v1.Pod) error {
	byUID := map[types.UID]*v1.Pod{}
	for _, p := range old {
		byUID[p.UID] = p
	}
	for _, p := range pods {
		if errs := api.ValidateResize(byUID[p.UID], p, kubecontainer.QOSClass); len(errs) > 0 {
			return fmt.Errorf("pod %s: %w", api.Key(p), errs.ToAggregate())
		}
	}
	return nil
}

func (s *FileSource) fail(err error) {
	s.sink.SetError(api.SourceFile, err)
	if err.Error() != s.lastErr {
		if len(s.last) > 0 {
			klog.Errorf("%v (keeping the %s it last produced)", err, plural(len(s.last), "pod"))
		} else {
			klog.Errorf("%v", err)
		}
	}
	s.lastErr = err.Error()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// MaxManifestSize bounds a manifest file, as maxManifestBody bounds the URL
// source's answer: parsing is what costs memory, and a bigger manifest is a
// mistake or an attack.
const MaxManifestSize = maxManifestBody

// readManifest reads one manifest without ever blocking: opened with
// O_NONBLOCK (a FIFO swapped in must not hang the source), and refused
// unless the opened descriptor is a regular file of at most
// MaxManifestSize bytes.
func readManifest(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	if fi.Size() > MaxManifestSize {
		return nil, fmt.Errorf("%d bytes, larger than the %d-byte limit", fi.Size(), MaxManifestSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err == nil && len(data) > MaxManifestSize {
		err = fmt.Errorf("larger than the %d-byte limit", MaxManifestSize)
	}
	return data, err
}
