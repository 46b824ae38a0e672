package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// maxWebSocketFrame caps the frames a WebSocket client may send. The
// Kubernetes streaming library reads each frame whole into memory (growing
// its buffer by doubling, so up to twice the frame) before passing it on,
// and takes frames of up to 32 MiB: one client could make the agent hold
// 60 MB. client-go sends at most 32 KiB of data in a frame.
const maxWebSocketFrame = 1 << 20

// errFrameTooLarge ends a WebSocket connection whose client announced a
// frame over maxWebSocketFrame.
var errFrameTooLarge = errors.New("WebSocket frame too large")

// guardedUpgrade is the ResponseWriter of a WebSocket upgrade. The
// connection it hands over when hijacked reads the client's frames through
// a frameLimiter, and closed is closed once the client's side ends (a read
// fails) or the connection is closed, whichever is first: the library
// gives no such signal of its own.
type guardedUpgrade struct {
	http.ResponseWriter
	maxFrame int64
	closed   chan struct{}
	once     sync.Once
}

func newGuardedUpgrade(w http.ResponseWriter, maxFrame int64) *guardedUpgrade {
	return &guardedUpgrade{ResponseWriter: w, maxFrame: maxFrame, closed: make(chan struct{})}
}

func (g *guardedUpgrade) end() { g.once.Do(func() { close(g.closed) }) }

// Hijack hands over the connection, reading what the server had buffered
// before what follows on the wire.
func (g *guardedUpgrade) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(g.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	r := &frameLimiter{r: rw.Reader, max: g.maxFrame, onEnd: g.end}
	return &notifyingConn{Conn: conn, onClose: g.end}, bufio.NewReadWriter(bufio.NewReader(r), rw.Writer), nil
}

// notifyingConn reports its Close.
type notifyingConn struct {
	net.Conn
	onClose func()
}

func (c *notifyingConn) Close() error {
	c.onClose()
	return c.Conn.Close()
}

// frameLimiter passes a client's WebSocket stream through unchanged while
// following its frame headers (RFC 6455 5.2), and fails as soon as a header
// announces a payload over max, before any of it is read. onEnd is called
// at the first error.
type frameLimiter struct {
	r     io.Reader
	max   int64
	onEnd func()
	err   error

	payload int64  // payload bytes of the current frame still to pass
	head    []byte // the header read so far of the next frame
}

func (f *frameLimiter) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.r.Read(p)
	if ferr := f.follow(p[:n]); ferr != nil {
		n, err = 0, ferr
	}
	if err != nil {
		f.err = err
		if f.onEnd != nil {
			f.onEnd()
		}
	}
	return n, err
}

// follow advances over b, a piece of the stream.
func (f *frameLimiter) follow(b []byte) error {
	for len(b) > 0 {
		if f.payload > 0 {
			skip := min(f.payload, int64(len(b)))
			f.payload -= skip
			b = b[skip:]
			continue
		}
		f.head = append(f.head, b[0])
		b = b[1:]
		size, length, done := headerLength(f.head)
		if !done {
			continue
		}
		if length > f.max || length < 0 {
			return fmt.Errorf("%w: %d bytes, at most %d", errFrameTooLarge, length, f.max)
		}
		if len(f.head) == size {
			f.head = f.head[:0]
			f.payload = length
		}
	}
	return nil
}

// headerLength reads a frame header's start: the header's whole size (with
// the masking key) and the payload length, once enough of it is there.
// The length is known before the masking key, so done is true from then on
// and the caller waits for size bytes.
func headerLength(h []byte) (size int, length int64, done bool) {
	if len(h) < 2 {
		return 0, 0, false
	}
	size, ext := 2, 0
	switch l := h[1] & 0x7f; l {
	case 126:
		ext = 2
	case 127:
		ext = 8
	default:
		length = int64(l)
	}
	size += ext
	if h[1]&0x80 != 0 {
		size += 4 // masking key
	}
	if len(h) < 2+ext {
		return 0, 0, false
	}
	for _, c := range h[2 : 2+ext] {
		length = length<<8 | int64(c)
	}
	return size, length, true
}
