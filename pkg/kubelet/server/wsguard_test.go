package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// clientFrame is a masked binary frame of n payload bytes, as a client
// sends it, its length in the shortest of the three encodings unless
// long says to use the 64-bit one.
func clientFrame(n int, long bool) []byte {
	h := []byte{0x82}
	switch {
	case long || n > 0xffff:
		h = append(h, 0x80|127)
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	case n > 125:
		h = append(h, 0x80|126)
		h = binary.BigEndian.AppendUint16(h, uint16(n))
	default:
		h = append(h, 0x80|byte(n))
	}
	h = append(h, 1, 2, 3, 4) // masking key
	return append(h, bytes.Repeat([]byte{'x'}, n)...)
}

// oneByte reads one byte at a time, so that every header is split.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(1, len(p))]) }

func TestFrameLimiter(t *testing.T) {
	const max = 1000
	cat := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	cases := []struct {
		name   string
		stream []byte
		split  bool
		tooBig bool // the stream fails with errFrameTooLarge, after the last frame that fits
	}{
		{"small frames", cat(clientFrame(0, false), clientFrame(5, false), clientFrame(125, false)), false, false},
		{"16-bit length at the cap", cat(clientFrame(3, false), clientFrame(max, false)), false, false},
		{"64-bit encoding of a small length", clientFrame(10, true), false, false},
		{"headers split across reads", cat(clientFrame(126, false), clientFrame(max, true), clientFrame(1, false)), true, false},
		{"over the cap", cat(clientFrame(5, false), clientFrame(max+1, false)), false, true},
		{"over the cap, split", cat(clientFrame(5, false), clientFrame(max+1, false)), true, true},
		{"64-bit length over the cap", clientFrame(70000, false), false, true},
		{"length with the top bit set", append([]byte{0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 0}, 1, 2, 3, 4), false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var src io.Reader = bytes.NewReader(c.stream)
			if c.split {
				src = oneByte{src}
			}
			ended := 0
			f := &frameLimiter{r: src, max: max, onEnd: func() { ended++ }}
			got, err := io.ReadAll(f)
			if c.tooBig {
				if !errors.Is(err, errFrameTooLarge) {
					t.Fatalf("err %v, want errFrameTooLarge", err)
				}
				// Nothing past the oversized frame's header was passed on.
				if fits := len(clientFrame(5, false)); len(got) > fits+14 || !bytes.HasPrefix(c.stream, got) {
					t.Errorf("passed %d of %d bytes", len(got), len(c.stream))
				}
			} else if err != nil || !bytes.Equal(got, c.stream) {
				t.Fatalf("passed %d of %d bytes, err %v", len(got), len(c.stream), err)
			}
			if ended != 1 {
				t.Errorf("onEnd called %d times, want once", ended)
			}
		})
	}
}

// Through the streaming library: a frame over the cap ends the connection
// and signals the session; frames within it reach the channel.
func TestGuardedWebSocket(t *testing.T) {
	closedc := make(chan (<-chan struct{}), 1)
	received := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, streams, closed, ok := openChannels(w, r, []wsstream.ChannelType{wsstream.ReadChannel}, false)
		if !ok {
			return
		}
		defer conn.Close()
		closedc <- closed
		buf := make([]byte, 16)
		n, _ := streams[0].Read(buf)
		received <- string(buf[:n])
		_, _ = io.Copy(io.Discard, streams[0])
		<-closed
	}))
	defer srv.Close()
	// A write buffer larger than the frame: gorilla sends it in one frame.
	d := gwebsocket.Dialer{Subprotocols: []string{"v4.channel.k8s.io"}, WriteBufferSize: 2 * maxWebSocketFrame}
	ws, _, err := d.Dial(strings.Replace(srv.URL, "http://", "ws://", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	closed := <-closedc
	if err := ws.WriteMessage(gwebsocket.BinaryMessage, []byte("\x00hello")); err != nil {
		t.Fatal(err)
	}
	if got := <-received; got != "hello" {
		t.Errorf("received %q", got)
	}
	select {
	case <-closed:
		t.Fatal("closed signalled while the client is there")
	default:
	}
	big := append([]byte{0}, bytes.Repeat([]byte{'x'}, maxWebSocketFrame)...)
	_ = ws.WriteMessage(gwebsocket.BinaryMessage, big)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("a frame over the cap did not end the connection")
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the connection is still open")
			}
			break
		}
	}
}
