package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func readAll(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) }

// flushWriter flushes after every write, so followed logs arrive as written.
type flushWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func (fw flushWriter) Write(p []byte) (int, error) {
	n, err := fw.w.Write(p)
	if fw.f != nil {
		fw.f.Flush()
	}
	return n, err
}

// containerLogs streams a container's logs, as kubectl logs asks for them
// (parseLogOptions).
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request, p map[string]string) {
	opts, previous, err := parseLogOptions(r.URL.Query(), time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ref, err := s.View.FindLoggedContainer(r.Context(), p["namespace"], p["pod"], p["container"], previous)
	if err != nil {
		writeLookupError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	if err := s.Runtime.Logs(r.Context(), ref.ID, opts, flushWriter{w, f}); err != nil {
		fmt.Fprintf(w, "\n[error reading logs: %v]\n", err)
	}
}

// parseLogOptions reads the query of a container's logs as the kubelet
// reads its PodLogOptions: follow, timestamps, previous, tailLines,
// limitBytes, sinceSeconds (from now) or sinceTime (RFC 3339), with the
// bounds of the kubelet's validation (at most one of the two since forms).
func parseLogOptions(q url.Values, now time.Time) (opts kubecontainer.LogOptions, previous bool, err error) {
	opts = kubecontainer.LogOptions{TailLines: -1}
	for name, dst := range map[string]*bool{"follow": &opts.Follow, "timestamps": &opts.Timestamps, "previous": &previous} {
		if v := q.Get(name); v != "" {
			if *dst, err = strconv.ParseBool(v); err != nil {
				return opts, false, fmt.Errorf("%s=%q: want true or false", name, v)
			}
		}
	}
	num := func(name string, least int64, want string) (int64, bool, error) {
		v := q.Get(name)
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < least {
			return 0, false, fmt.Errorf("%s=%q: want %s", name, v, want)
		}
		return n, true, nil
	}
	if n, ok, err := num("tailLines", 0, "a non-negative integer"); err != nil {
		return opts, false, err
	} else if ok {
		opts.TailLines = n
	}
	if opts.LimitBytes, _, err = num("limitBytes", 1, "a positive integer"); err != nil {
		return opts, false, err
	}
	secs, bySeconds, err := num("sinceSeconds", 1, "a positive integer")
	if err != nil {
		return opts, false, err
	}
	if bySeconds {
		opts.Since = now.Add(-time.Duration(secs) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		if bySeconds {
			return opts, false, fmt.Errorf("at most one of sinceTime or sinceSeconds may be specified")
		}
		if opts.Since, err = time.Parse(time.RFC3339, v); err != nil {
			return opts, false, fmt.Errorf("sinceTime=%q: want an RFC 3339 time", v)
		}
	}
	return opts, previous, nil
}

// nodeLogs lists and serves files under the node log directory. No request
// reaches outside it: ".." and backslashes are refused, and a symlink is
// followed only when it resolves inside the directory, or to the log file of
// a container of this agent (so /var/log/containers/*.log works).
func (s *Server) nodeLogs(w http.ResponseWriter, r *http.Request, p map[string]string) {
	rel := p["*"]
	if strings.ContainsAny(rel, "\\\x00%") || strings.Contains(r.URL.RawPath, "%2") {
		writeError(w, http.StatusBadRequest, "invalid log path")
		return
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." || part == "." {
			writeError(w, http.StatusBadRequest, "invalid log path")
			return
		}
	}
	base, err := filepath.EvalSymlinks(s.opts.NodeLogDir)
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("log directory: %v", err))
		return
	}
	resolved, err := filepath.EvalSymlinks(filepath.Join(base, filepath.FromSlash(rel)))
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such log file: %s", rel))
		return
	}
	inside := resolved == base || strings.HasPrefix(resolved, base+string(filepath.Separator))
	if !inside && !s.View.IsContainerLogFile(resolved) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s resolves outside the log directory", rel))
		return
	}
	// Opened without blocking (a FIFO must not pin a thread) and judged
	// by the descriptor: what is served is what was checked.
	f, err := os.OpenFile(resolved, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("open %s: %v", rel, err))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such log file: %s", rel))
		return
	}
	switch {
	case fi.IsDir():
		entries, err := f.ReadDir(-1)
		if err != nil {
			writeError(w, http.StatusForbidden, fmt.Sprintf("list %s: %v", rel, err))
			return
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() {
				n += "/"
			}
			names = append(names, n)
		}
		sort.Strings(names)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, n := range names {
			fmt.Fprintln(w, n)
		}
	case !fi.Mode().IsRegular():
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s is not a regular file", rel))
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		http.ServeContent(w, r, "", fi.ModTime(), f)
	}
}

// execResult is the answer to POST /exec and /run.
type execResult struct {
	ExitCode int    `json:"exitCode"`
	Output   string `json:"output"`
}

// execTimeout bounds a command run through the API.
const execTimeout = 5 * time.Minute

// exec runs a command in a running container: ?command= (repeatable, one
// argument each) or, on the classic /run, ?cmd= (split on spaces when
// given once).
func (s *Server) exec(w http.ResponseWriter, r *http.Request, p map[string]string) {
	q := r.URL.Query()
	cmd := q["command"]
	if len(cmd) == 0 {
		cmd = q["cmd"]
		if len(cmd) == 1 {
			cmd = strings.Fields(cmd[0])
		}
	}
	if len(cmd) == 0 {
		writeError(w, http.StatusBadRequest, "no command: pass ?command=<arg> (repeatable)")
		return
	}
	ref, ok := s.runningContainer(w, r, p)
	if !ok {
		return
	}
	if isStreamRequest(r) {
		serveStream(w, r, "exec", func(ctx context.Context, st kubecontainer.Streams) (int, error) {
			return s.Runtime.ExecStream(ctx, ref.ID, cmd, st)
		})
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusBadRequest, "GET /exec needs a streaming upgrade (SPDY or WebSocket); without one, POST runs the command and answers JSON")
		return
	}
	code, out, err := s.Runtime.Exec(r.Context(), ref.ID, cmd, execTimeout)
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("exec: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, execResult{ExitCode: code, Output: string(out)})
}

// runningContainer finds the running container a streaming or exec request
// names (with the pod's UID when the path has one), answering the error
// itself when there is none.
func (s *Server) runningContainer(w http.ResponseWriter, r *http.Request, p map[string]string) (ContainerRef, bool) {
	ref, err := s.View.FindRunningContainer(r.Context(), p["namespace"], p["pod"], p["uid"], p["container"])
	if err != nil {
		writeLookupError(w, err)
		return ref, false
	}
	if !ref.Running {
		writeError(w, http.StatusConflict, fmt.Sprintf("container %s of pod %s/%s is not running", p["container"], p["namespace"], p["pod"]))
		return ref, false
	}
	return ref, true
}

// attach connects the client to a running container's main process.
func (s *Server) attach(w http.ResponseWriter, r *http.Request, p map[string]string) {
	ref, ok := s.runningContainer(w, r, p)
	if !ok {
		return
	}
	if !isStreamRequest(r) {
		writeError(w, http.StatusBadRequest, "attach needs a streaming upgrade (SPDY or WebSocket)")
		return
	}
	serveStream(w, r, "attach", func(ctx context.Context, st kubecontainer.Streams) (int, error) {
		return 0, s.Runtime.Attach(ctx, ref.ID, st)
	})
}

// portForward forwards ports to a pod's network namespace.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request, p map[string]string) {
	p["container"] = kubecontainer.InfraContainerName
	ref, ok := s.runningContainer(w, r, p)
	if !ok {
		return
	}
	if !isStreamRequest(r) {
		writeError(w, http.StatusBadRequest, "portForward needs a streaming upgrade (SPDY or WebSocket)")
		return
	}
	s.servePortForward(w, r, ref.ID)
}
