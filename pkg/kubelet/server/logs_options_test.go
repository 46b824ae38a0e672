package server

import (
	"net/url"
	"strings"
	"testing"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// The query of /containerLogs is read as the kubelet reads PodLogOptions.
func TestParseLogOptions(t *testing.T) {
	now := time.Date(2026, 12, 6, 4, 0, 0, 500, time.UTC)
	cases := []struct {
		query    string
		want     kubecontainer.LogOptions
		previous bool
		err      string // a fragment of the error; "" for none
	}{
		{"", kubecontainer.LogOptions{TailLines: -1}, false, ""},
		{"follow=true&timestamps=1&previous=true", kubecontainer.LogOptions{TailLines: -1, Follow: true, Timestamps: true}, true, ""},
		{"tailLines=0", kubecontainer.LogOptions{TailLines: 0}, false, ""},
		{"tailLines=-1", kubecontainer.LogOptions{}, false, "tailLines"},
		{"limitBytes=10", kubecontainer.LogOptions{TailLines: -1, LimitBytes: 10}, false, ""},
		{"limitBytes=0", kubecontainer.LogOptions{}, false, "limitBytes"},
		{"limitBytes=x", kubecontainer.LogOptions{}, false, "limitBytes"},
		{"sinceSeconds=30", kubecontainer.LogOptions{TailLines: -1, Since: now.Add(-30 * time.Second)}, false, ""},
		{"sinceSeconds=0", kubecontainer.LogOptions{}, false, "sinceSeconds"},
		{"sinceTime=2026-12-06T03:00:00Z", kubecontainer.LogOptions{TailLines: -1, Since: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}, false, ""},
		{"sinceTime=2026-12-06T05:00:00%2B02:00", kubecontainer.LogOptions{TailLines: -1, Since: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}, false, ""},
		{"sinceTime=yesterday", kubecontainer.LogOptions{}, false, "RFC 3339"},
		{"sinceTime=2026-12-06T03:00:00Z&sinceSeconds=5", kubecontainer.LogOptions{}, false, "at most one"},
		{"timestamps=maybe", kubecontainer.LogOptions{}, false, "timestamps"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, previous, err := parseLogOptions(q, now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil || previous != tc.previous || !got.Since.Equal(tc.want.Since) {
				t.Fatalf("%+v previous=%v %v; want %+v previous=%v", got, previous, err, tc.want, tc.previous)
			}
			got.Since, tc.want.Since = time.Time{}, time.Time{}
			if got != tc.want {
				t.Errorf("%+v, want %+v", got, tc.want)
			}
		})
	}
}
