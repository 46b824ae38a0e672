package server

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// fakeClaims gives every pod one measured claim.
type fakeClaims struct{ path string }

func (f fakeClaims) MeasuredClaims(*v1.Pod) []volumes.MeasuredClaim {
	return []volumes.MeasuredClaim{{Volume: "data", Claim: "db", Path: f.path}}
}

// A measured claim is in the pod's volume stats, with its claim, and in
// /metrics as the kubelet's kubelet_volume_stats_* series, once per claim.
func TestClaimVolumeStats(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	local := webPods(v1.PodStatus{})
	s := New(Deps{View: local.view(), Metrics: prometheus.NewRegistry(), Claims: fakeClaims{dir}}, Options{NodeName: "n"})
	pod := local.view().GetPods()[0]
	vs := s.claimStats(pod)
	if len(vs) != 1 || vs[0].Name != "data" || vs[0].PVCRef == nil || vs[0].PVCRef.Name != "db" || vs[0].PVCRef.Namespace != pod.Namespace ||
		*vs[0].CapacityBytes != st.Blocks*uint64(st.Bsize) || vs[0].InodesUsed == nil {
		t.Errorf("volume stats %+v", vs)
	}
	srv := httptest.NewServer(s.Handler(true))
	defer srv.Close()
	resp, body := do(t, "GET", srv.URL+"/metrics", "")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	for _, name := range []string{"capacity_bytes", "available_bytes", "used_bytes", "inodes", "inodes_free", "inodes_used"} {
		series := fmt.Sprintf(`kubelet_volume_stats_%s{namespace=%q,persistentvolumeclaim="db"}`, name, pod.Namespace)
		if n := strings.Count(body, series+" "); n != 1 {
			t.Errorf("%s appears %d times in /metrics, want once", series, n)
		}
	}
}
