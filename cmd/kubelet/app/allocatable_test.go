package app

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseReserved(t *testing.T) {
	for _, c := range []struct {
		in, want, wantErr string
	}{
		{"", "", ""},
		{"cpu=100m,memory=100Mi,pid=1000", "cpu=100m,memory=100Mi,pid=1k", ""},
		{" memory=1Gi ", "memory=1Gi", ""},
		{"gpu=1", "", `"gpu=1": want cpu=, memory= or pid=`},
		{"memory", "", "memory: want a quantity"},
		{"memory=lots", "", "memory: want a quantity"},
		{"cpu=-1", "", "cpu: want a quantity of at least 0"},
		{"cpu=1,cpu=2", "", "cpu given twice"},
	} {
		got, err := ParseReserved(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		var parts []string
		for _, name := range []v1.ResourceName{"cpu", "memory", "pid"} {
			if q, ok := got[name]; ok {
				parts = append(parts, string(name)+"="+q.String())
			}
		}
		if s := strings.Join(parts, ","); s != c.want {
			t.Errorf("%q: %s, want %s", c.in, s, c.want)
		}
	}
}

func TestNodeAllocatable(t *testing.T) {
	capacity := v1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("8Gi"),
		"pods": resource.MustParse("110"), "pid": resource.MustParse("4194304")}
	for _, c := range []struct {
		name                 string
		kube, system         string
		enforce              []string
		wantPods             string // kubepods: cpu,memory,pid
		wantReserved         string // what the Node's allocatable leaves out: cpu,memory,pid
		wantErr, wantOptsErr string
	}{
		{"defaults", "", "", []string{"pods"}, "2,8Gi,4194304", "0,100Mi,0", "", ""},
		{"both reserved", "cpu=500m,memory=1Gi,pid=1000", "memory=512Mi,cpu=250m", []string{"pods"},
			"1250m,6656Mi,4193304", "750m,1636Mi,1k", "", ""},
		{"not enforced: capacity", "memory=1Gi", "", []string{"none"}, "2,8Gi,4194304", "0,1124Mi,0", "", ""},
		{"nothing left", "memory=6Gi", "memory=2Gi", []string{"pods"}, "", "", "nothing is left for pods", ""},
		{"reserved cgroups unsupported", "", "", []string{"pods", "system-reserved"}, "", "", "", `--enforce-node-allocatable "system-reserved"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := NewOptions()
			o.KubeReserved, o.SystemReserved, o.EnforceNodeAllocatable = c.kube, c.system, c.enforce
			a, err := newNodeAllocatable(o)
			if c.wantOptsErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantOptsErr) {
					t.Fatalf("error %v, want %q", err, c.wantOptsErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			limits, err := a.podsLimits(capacity)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			str := func(l v1.ResourceList) string {
				cpu, mem, pid := l["cpu"], l["memory"], l["pid"]
				return cpu.String() + "," + mem.String() + "," + pid.String()
			}
			if got := str(limits); got != c.wantPods {
				t.Errorf("kubepods %s, want %s", got, c.wantPods)
			}
			if _, ok := limits["pods"]; ok {
				t.Error("kubepods bounded by a pod count")
			}
			if got := str(a.reserved()); got != c.wantReserved {
				t.Errorf("reserved %s, want %s", got, c.wantReserved)
			}
		})
	}
}
