package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// The streaming endpoints speak what client-go and kubectl speak to a
// kubelet: SPDY/3.1 or WebSocket upgrades carrying the remotecommand
// protocols (exec, attach) and port-forward. The framing is the Kubernetes
// streaming library's; this file maps it onto the runtime.

const (
	// streamIdleTimeout closes a session with no traffic for this long
	// (the kubelet's default streamingConnectionIdleTimeout).
	streamIdleTimeout = 4 * time.Hour
	// streamCreationTimeout bounds the wait for a client's streams.
	streamCreationTimeout = 30 * time.Second

	// maxPendingPairs bounds the port-forward requests of one connection
	// that have one of their two streams: each holds its stream until the
	// other comes or the creation timeout passes.
	maxPendingPairs = 128

	portForwardProtocol = "portforward.k8s.io"
	// tunnelProtocol is client-go's port-forward over WebSocket: SPDY
	// frames carried in WebSocket binary messages.
	tunnelProtocol = "SPDY/3.1+" + portForwardProtocol
)

// remotecommandProtocols are the SPDY remotecommand versions, newest first
// (v5 is v4 on SPDY: its CLOSE signal is WebSocket's).
var remotecommandProtocols = []string{"v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"}

// Channels of the WebSocket remotecommand protocols.
const (
	stdinChannel = iota
	stdoutChannel
	stderrChannel
	errorChannel
	resizeChannel
)

// streamOptions are the standard streams a session asks for.
type streamOptions struct{ stdin, stdout, stderr, tty bool }

func parseStreamOptions(r *http.Request) (streamOptions, error) {
	q := r.URL.Query()
	flag := func(name string) bool {
		b, _ := strconv.ParseBool(q.Get(name))
		return b
	}
	o := streamOptions{stdin: flag(v1.ExecStdinParam), stdout: flag(v1.ExecStdoutParam), stderr: flag(v1.ExecStderrParam), tty: flag(v1.ExecTTYParam)}
	if o.tty {
		o.stderr = false // a terminal has one output
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, fmt.Errorf("you must specify at least 1 of %s, %s, %s", v1.ExecStdinParam, v1.ExecStdoutParam, v1.ExecStderrParam)
	}
	return o, nil
}

// session is one upgraded exec or attach connection.
type session struct {
	conn   io.Closer
	closed <-chan struct{} // closed when the client goes away
	stdin  io.ReadCloser
	stdout io.WriteCloser
	stderr io.WriteCloser
	resize io.ReadCloser
	// status reports the outcome on the error stream: as JSON (v4, v5) or
	// as text for failures only (v1 to v3).
	status func(*metav1.Status) error
}

// streams are the session's ends as the runtime takes them.
func (s *session) streams(ctx context.Context, tty bool) kubecontainer.Streams {
	st := kubecontainer.Streams{TTY: tty}
	if s.stdin != nil {
		st.Stdin = s.stdin
	}
	if s.stdout != nil {
		st.Stdout = s.stdout
	}
	if s.stderr != nil {
		st.Stderr = s.stderr
	}
	if s.resize != nil && tty {
		sizes := make(chan kubecontainer.TerminalSize)
		go func() {
			defer close(sizes)
			dec := json.NewDecoder(s.resize)
			for {
				var sz kubecontainer.TerminalSize
				if dec.Decode(&sz) != nil {
					return
				}
				select {
				case sizes <- sz:
				case <-ctx.Done():
					return
				}
			}
		}()
		st.Resize = sizes
	}
	return st
}

func jsonStatus(w io.Writer) func(*metav1.Status) error {
	return func(st *metav1.Status) error {
		data, err := json.Marshal(st)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
}

func textStatus(w io.Writer) func(*metav1.Status) error {
	return func(st *metav1.Status) error {
		if st.Status == metav1.StatusSuccess {
			return nil
		}
		_, err := io.WriteString(w, st.Message)
		return err
	}
}

// exitStatus is the status of a finished command, as client-go reads it:
// a non-zero exit is NonZeroExitCode with an ExitCode cause (client-go
// returns exec.CodeExitError{Code}).
func exitStatus(code int, err error) *metav1.Status {
	switch {
	case err != nil:
		return &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError,
			Code: http.StatusInternalServerError, Message: err.Error()}
	case code != 0:
		return &metav1.Status{Status: metav1.StatusFailure, Reason: "NonZeroExitCode",
			Message: fmt.Sprintf("command terminated with non-zero exit code: exit status %d", code),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: strconv.Itoa(code)}}}}
	}
	return &metav1.Status{Status: metav1.StatusSuccess}
}

// clearDeadlines lifts the server's request deadlines from the connection
// before it is hijacked: they would otherwise cut every session after the
// read timeout. The session's own idle timeout bounds it instead.
func clearDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}

// openSession upgrades the request to a remotecommand session; on failure
// the client has been answered and ok is false.
func openSession(w http.ResponseWriter, r *http.Request, o streamOptions) (s *session, ok bool) {
	clearDeadlines(w)
	if wsstream.IsWebSocketRequest(r) {
		return openWebSocketSession(w, r, o)
	}
	return openSPDYSession(w, r, o)
}

func openWebSocketSession(w http.ResponseWriter, r *http.Request, o streamOptions) (*session, bool) {
	pick := func(use bool, t wsstream.ChannelType) wsstream.ChannelType {
		if use {
			return t
		}
		return wsstream.IgnoreChannel
	}
	channels := []wsstream.ChannelType{
		stdinChannel:  pick(o.stdin, wsstream.ReadChannel),
		stdoutChannel: pick(o.stdout, wsstream.WriteChannel),
		stderrChannel: pick(o.stderr, wsstream.WriteChannel),
		errorChannel:  wsstream.WriteChannel,
		resizeChannel: wsstream.ReadChannel,
	}
	conn, proto, streams, closed, ok := openChannels(w, r, channels, true)
	if !ok {
		return nil, false
	}
	// An empty message on the first writable channel tells the client the
	// session is open.
	switch {
	case o.stdout:
		_, _ = streams[stdoutChannel].Write(nil)
	case o.stderr:
		_, _ = streams[stderrChannel].Write(nil)
	default:
		_, _ = streams[errorChannel].Write(nil)
	}
	s := &session{conn: conn, closed: closed, resize: streams[resizeChannel], status: textStatus(streams[errorChannel])}
	if o.stdin {
		s.stdin = streams[stdinChannel]
	}
	if o.stdout {
		s.stdout = streams[stdoutChannel]
	}
	if o.stderr {
		s.stderr = streams[stderrChannel]
	}
	if proto == "v4.channel.k8s.io" || proto == "v4.base64.channel.k8s.io" || proto == "v5.channel.k8s.io" {
		s.status = jsonStatus(streams[errorChannel])
	}
	return s, true
}

// openChannels upgrades to a WebSocket carrying channels, in the
// subprotocols the kubelet offers (v4, its base64 form, the unversioned
// ones, and with streamClose v5, whose CLOSE signal ends a channel); on
// failure the client has been answered and ok is false. closed is closed
// when the client goes away. A client frame over maxWebSocketFrame ends the
// connection.
func openChannels(w http.ResponseWriter, r *http.Request, channels []wsstream.ChannelType, streamClose bool) (conn *wsstream.Conn, proto string, streams []io.ReadWriteCloser, closed <-chan struct{}, ok bool) {
	protocols := wsstream.NewDefaultChannelProtocols(channels)
	protocols["v4.channel.k8s.io"] = wsstream.ChannelProtocolConfig{Binary: true, Channels: channels}
	protocols["v4.base64.channel.k8s.io"] = wsstream.ChannelProtocolConfig{Binary: false, Channels: channels}
	if streamClose {
		protocols["v5.channel.k8s.io"] = wsstream.ChannelProtocolConfig{Binary: true, Channels: channels}
	}
	conn = wsstream.NewConn(protocols)
	conn.SetIdleTimeout(streamIdleTimeout)
	guard := newGuardedUpgrade(w, maxWebSocketFrame)
	proto, streams, err := conn.Open(guard, r)
	if err != nil {
		klog.V(2).Infof("WebSocket upgrade of %s: %v", r.URL.Path, err)
		return nil, "", nil, nil, false
	}
	return conn, proto, streams, guard.closed, true
}

// acceptedStream is a stream the client opened, with the signal that its
// reply was sent.
type acceptedStream struct {
	httpstream.Stream
	replySent <-chan struct{}
}

// upgradeSPDY upgrades to SPDY; each stream the client opens is passed to
// accept from the connection's own goroutine.
func upgradeSPDY(w http.ResponseWriter, r *http.Request, accept func(acceptedStream)) httpstream.Connection {
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(st httpstream.Stream, replySent <-chan struct{}) error {
		accept(acceptedStream{st, replySent})
		return nil
	})
	if conn != nil {
		conn.SetIdleTimeout(streamIdleTimeout)
	}
	return conn
}

func openSPDYSession(w http.ResponseWriter, r *http.Request, o streamOptions) (*session, bool) {
	proto, err := httpstream.Handshake(r, w, remotecommandProtocols)
	if err != nil {
		return nil, false // Handshake answered the client
	}
	if proto == "" {
		proto = "channel.k8s.io" // a client that does not negotiate speaks v1
	}
	incoming := make(chan acceptedStream, 8)
	conn := upgradeSPDY(w, r, func(st acceptedStream) {
		select {
		case incoming <- st:
		default:
			_ = st.Reset() // more streams than a session has
		}
	})
	if conn == nil {
		return nil, false
	}
	resizable := proto != "channel.k8s.io" && proto != "v2.channel.k8s.io"
	want := 1 // the error stream
	for _, b := range []bool{o.stdin, o.stdout, o.stderr, o.tty && resizable} {
		if b {
			want++
		}
	}
	s := &session{conn: conn}
	closed := make(chan struct{})
	go func() {
		<-conn.CloseChan()
		close(closed)
	}()
	s.closed = closed
	timeout := time.NewTimer(streamCreationTimeout)
	defer timeout.Stop()
	for got := 0; got < want; got++ {
		var st acceptedStream
		select {
		case st = <-incoming:
		case <-closed: // the client went away
			return nil, false
		case <-timeout.C:
			klog.V(2).Infof("Stream session %s: timed out waiting for the client's streams", r.URL.Path)
			_ = conn.Close()
			return nil, false
		}
		select { // the reply must be sent before the streams are used
		case <-st.replySent:
		case <-closed:
			return nil, false
		case <-timeout.C:
			_ = conn.Close()
			return nil, false
		}
		switch st.Headers().Get(v1.StreamType) {
		case v1.StreamTypeError:
			if proto == "v4.channel.k8s.io" || proto == "v5.channel.k8s.io" {
				s.status = jsonStatus(st)
			} else {
				s.status = textStatus(st)
			}
		case v1.StreamTypeStdin:
			s.stdin = st
		case v1.StreamTypeStdout:
			s.stdout = st
		case v1.StreamTypeStderr:
			s.stderr = st
		case v1.StreamTypeResize:
			s.resize = st
		default:
			_ = st.Reset()
			got--
		}
	}
	if s.status == nil {
		_ = conn.Close()
		return nil, false
	}
	return s, true
}

// isStreamRequest says whether the request asks for an upgrade to a
// streaming protocol.
func isStreamRequest(r *http.Request) bool {
	return httpstream.IsUpgradeRequest(r)
}

// serveStream runs an exec or attach session on the upgraded connection.
// run gets the session's streams and returns the exit code (attach: 0).
func serveStream(w http.ResponseWriter, r *http.Request, what string, run func(context.Context, kubecontainer.Streams) (int, error)) {
	o, err := parseStreamOptions(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s, ok := openSession(w, r, o)
	if !ok {
		return
	}
	defer s.conn.Close()
	// The request's context ends with the server (Serve's BaseContext):
	// a hijacked session stops when the agent does.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel() // the client went away: end the session (an exec's process is killed)
		case <-ctx.Done():
		}
	}()
	code, err := run(ctx, s.streams(ctx, o.tty))
	if err != nil {
		klog.V(1).Infof("%s %s: %v", what, r.URL.Path, err)
	}
	// Output is complete before the status: the client reads them apart.
	for _, c := range []io.Closer{s.stdout, s.stderr} {
		if c != nil {
			_ = c.Close()
		}
	}
	if err := s.status(exitStatus(code, err)); err != nil {
		klog.V(2).Infof("%s %s: write status: %v", what, r.URL.Path, err)
	}
}

// servePortForward forwards the ports the client asks for to the pod whose
// infra container is infraID, over SPDY (portforward.k8s.io), over
// WebSocket channels (?port=), or over SPDY tunnelled in WebSocket.
func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request, infraID string) {
	clearDeadlines(w)
	forward := func(ctx context.Context, port int32, data io.ReadWriteCloser) error {
		return s.Runtime.PortForward(ctx, infraID, port, data)
	}
	switch {
	case wsstream.IsWebSocketRequestWithTunnelingProtocol(r):
		up := gwebsocket.Upgrader{Subprotocols: []string{tunnelProtocol}, CheckOrigin: func(*http.Request) bool { return true }}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return // the upgrader answered the client
		}
		tunnel := portforward.NewTunnelingConnection("server", ws)
		pf := newSPDYPortForward(r.Context(), forward)
		conn, err := spdy.NewServerConnection(tunnel, func(st httpstream.Stream, replySent <-chan struct{}) error {
			pf.accept(acceptedStream{st, replySent})
			return nil
		})
		if err != nil {
			_ = tunnel.Close()
			return
		}
		conn.SetIdleTimeout(streamIdleTimeout)
		pf.run(conn)
	case wsstream.IsWebSocketRequest(r):
		webSocketPortForward(w, r, forward)
	default:
		if _, err := httpstream.Handshake(r, w, []string{portForwardProtocol}); err != nil {
			return
		}
		pf := newSPDYPortForward(r.Context(), forward)
		conn := upgradeSPDY(w, r, pf.accept)
		if conn == nil {
			return
		}
		pf.run(conn)
	}
}

// spdyPortForward pairs each request's data and error streams (by
// requestID) and forwards each pair.
type spdyPortForward struct {
	forward func(context.Context, int32, io.ReadWriteCloser) error
	ctx     context.Context
	cancel  context.CancelFunc

	mu    sync.Mutex
	pairs map[string]*streamPair
	wg    sync.WaitGroup
}

type streamPair struct {
	data, errs httpstream.Stream
	created    time.Time
}

func newSPDYPortForward(parent context.Context, forward func(context.Context, int32, io.ReadWriteCloser) error) *spdyPortForward {
	ctx, cancel := context.WithCancel(parent)
	return &spdyPortForward{forward: forward, ctx: ctx, cancel: cancel, pairs: map[string]*streamPair{}}
}

// accept files a new stream; a complete pair starts forwarding.
func (p *spdyPortForward) accept(st acceptedStream) {
	id := st.Headers().Get(v1.PortForwardRequestIDHeader)
	p.mu.Lock()
	defer p.mu.Unlock()
	pair := p.pairs[id]
	if pair == nil {
		if len(p.pairs) >= maxPendingPairs {
			_ = st.Reset() // a client opening halves of pairs without end
			return
		}
		pair = &streamPair{created: time.Now()}
		p.pairs[id] = pair
	}
	switch st.Headers().Get(v1.StreamType) {
	case v1.StreamTypeData:
		pair.data = st
	case v1.StreamTypeError:
		pair.errs = st
	default:
		_ = st.Reset()
		return
	}
	if pair.data == nil || pair.errs == nil {
		return
	}
	delete(p.pairs, id)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.forwardPair(pair)
	}()
}

func (p *spdyPortForward) forwardPair(pair *streamPair) {
	defer pair.errs.Close()
	defer pair.data.Close()
	port, err := strconv.ParseUint(pair.data.Headers().Get(v1.PortHeader), 10, 16)
	if err == nil && port == 0 {
		err = fmt.Errorf("port 0")
	}
	if err != nil {
		fmt.Fprintf(pair.errs, "invalid port %q: %v", pair.data.Headers().Get(v1.PortHeader), err)
		return
	}
	if err := p.forward(p.ctx, int32(port), pair.data); err != nil {
		fmt.Fprintf(pair.errs, "error forwarding port %d to pod: %v", port, err)
	}
}

// run serves until the connection closes, dropping pairs left incomplete
// past the creation timeout.
func (p *spdyPortForward) run(conn httpstream.Connection) {
	defer conn.Close()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-conn.CloseChan():
			p.cancel()
			p.wg.Wait()
			return
		case <-p.ctx.Done(): // the server stops
			p.wg.Wait()
			return
		case <-tick.C:
			p.mu.Lock()
			for id, pair := range p.pairs {
				if time.Since(pair.created) > streamCreationTimeout {
					for _, st := range []httpstream.Stream{pair.data, pair.errs} {
						if st != nil {
							_ = st.Reset()
						}
					}
					delete(p.pairs, id)
				}
			}
			p.mu.Unlock()
		}
	}
}

// webSocketPortForward forwards the ?port= ports over WebSocket channels:
// for the i-th port, channel 2i carries data and 2i+1 errors, each
// starting with the port number (2 bytes, little-endian).
func webSocketPortForward(w http.ResponseWriter, r *http.Request, forward func(context.Context, int32, io.ReadWriteCloser) error) {
	var ports []uint16
	for _, v := range r.URL.Query()[v1.PortHeader] {
		p, err := strconv.ParseUint(v, 10, 16)
		if err != nil || p == 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid port %q", v))
			return
		}
		ports = append(ports, uint16(p))
	}
	if len(ports) == 0 {
		writeError(w, http.StatusBadRequest, "at least one port must be given with ?port=")
		return
	}
	channels := make([]wsstream.ChannelType, 0, 2*len(ports))
	for range ports {
		channels = append(channels, wsstream.ReadWriteChannel, wsstream.WriteChannel)
	}
	conn, _, streams, _, ok := openChannels(w, r, channels, false)
	if !ok {
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wg sync.WaitGroup
	for i, port := range ports {
		data, errs := streams[2*i], streams[2*i+1]
		head := binary.LittleEndian.AppendUint16(nil, port)
		if _, err := data.Write(head); err != nil {
			return
		}
		if _, err := errs.Write(head); err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer errs.Close()
			if err := forward(ctx, int32(port), data); err != nil {
				fmt.Fprintf(errs, "error forwarding port %d to pod: %v", port, err)
			}
		}()
	}
	wg.Wait()
}
