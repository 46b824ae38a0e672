package kuberuntime

import (
	"bytes"
	"context"
	"errors"
	"testing"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
)

// limitBytes counts the bytes written, cuts the last write at the bound
// and ends the copy there, as the kubelet's log writer does.
func TestLimitWriter(t *testing.T) {
	cases := []struct {
		name     string
		limit    int64
		writes   []string
		want     string
		failedAt int // index of the first failing write; -1: none
		full     bool
	}{
		{"under the bound", 10, []string{"abc\n", "de\n"}, "abc\nde\n", -1, false},
		{"exactly the bound", 7, []string{"abc\n", "de\n"}, "abc\nde\n", -1, true},
		{"cut mid-line", 5, []string{"abc\n", "def\n", "x\n"}, "abc\nd", 1, true},
		{"one byte", 1, []string{"2026-12-06T03:52:27.000000000Z hello\n"}, "2", 0, true},
		{"writes after the bound fail", 4, []string{"abc\n", "d"}, "abc\n", 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			full := false
			lw := &limitWriter{w: &out, remain: tc.limit, full: func() { full = true }}
			failedAt := -1
			for i, s := range tc.writes {
				if _, err := lw.Write([]byte(s)); err != nil {
					if !errors.Is(err, errLogLimit) {
						t.Fatalf("write %d: %v", i, err)
					}
					failedAt = i
					break
				}
			}
			if out.String() != tc.want || failedAt != tc.failedAt || full != tc.full {
				t.Errorf("wrote %q, failed at %d, full %v; want %q, %d, %v", out.String(), failedAt, full, tc.want, tc.failedAt, tc.full)
			}
		})
	}
}

// The Manager applies limitBytes over the runtime's stream: the bound
// reached is success, not an error.
func TestLogsLimitBytes(t *testing.T) {
	m := newTestManager(t, Config{}, containertest.NewFakeClient())
	for _, tc := range []struct {
		limit int64
		want  string
	}{{0, "log of c1\n"}, {3, "log"}, {10, "log of c1\n"}, {100, "log of c1\n"}} {
		var out bytes.Buffer
		if err := m.Logs(context.Background(), "c1", kubecontainer.LogOptions{LimitBytes: tc.limit}, &out); err != nil || out.String() != tc.want {
			t.Errorf("limitBytes %d: %q, %v; want %q", tc.limit, out.String(), err, tc.want)
		}
	}
}
