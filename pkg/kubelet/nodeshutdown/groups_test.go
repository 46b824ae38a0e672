package nodeshutdown

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		name             string
		period, critical time.Duration
		byPriority       []Group
		want             []Group
	}{
		{name: "off", want: nil},
		{name: "period alone: every pod gets it, critical pods none", period: 30 * time.Second,
			want: []Group{{0, 30 * time.Second}, {SystemCriticalPriority, 0}}},
		{name: "period and critical pods", period: 10 * time.Second, critical: 4 * time.Second,
			want: []Group{{0, 6 * time.Second}, {SystemCriticalPriority, 4 * time.Second}}},
		{name: "critical pods longer than the period: off", period: 5 * time.Second, critical: 6 * time.Second, want: nil},
		{name: "whole seconds", period: 10500 * time.Millisecond, critical: 4 * time.Second,
			want: []Group{{0, 6 * time.Second}, {SystemCriticalPriority, 4 * time.Second}}},
		{name: "by priority, sorted", byPriority: []Group{{100000, 120 * time.Second}, {SystemCriticalPriority, 10 * time.Second}, {0, 60 * time.Second}},
			want: []Group{{0, 60 * time.Second}, {100000, 120 * time.Second}, {SystemCriticalPriority, 10 * time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Table(tc.period, tc.critical, tc.byPriority)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Table = %v, want %v", got, tc.want)
			}
		})
	}
	if got := Requested([]Group{{0, 6 * time.Second}, {SystemCriticalPriority, 4 * time.Second}}); got != 10*time.Second {
		t.Errorf("Requested = %v, want 10s", got)
	}
}

func pod(name string, priority *int32, class string, grace *int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)},
		Spec: v1.PodSpec{Priority: priority, PriorityClassName: class, TerminationGracePeriodSeconds: grace}}
}

func TestPriority(t *testing.T) {
	for _, tc := range []struct {
		pod  *v1.Pod
		want int32
	}{
		{pod("none", nil, "", nil), 0},
		{pod("set", ptr.To[int32](42), "", nil), 42},
		{pod("set wins over the class", ptr.To[int32](7), "system-node-critical", nil), 7},
		{pod("node-critical", nil, "system-node-critical", nil), 2000001000},
		{pod("cluster-critical", nil, "system-cluster-critical", nil), 2000000000},
		{pod("other class", nil, "high", nil), 0},
	} {
		t.Run(tc.pod.Name, func(t *testing.T) {
			if got := Priority(tc.pod); got != tc.want {
				t.Errorf("Priority = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestAssign(t *testing.T) {
	table := []Group{{10, time.Second}, {20, time.Second}, {30, time.Second}}
	for _, tc := range []struct {
		priority int32
		row      int
	}{
		{-5, 0}, // below every row: the first
		{10, 0},
		{15, 0}, // between rows: the lower one
		{20, 1},
		{29, 1},
		{30, 2},
		{1 << 30, 2}, // above every row: the last
	} {
		p := pod("p", ptr.To(tc.priority), "", nil)
		rows := Assign(table, []*v1.Pod{p})
		for i, r := range rows {
			if got := len(r) == 1; got != (i == tc.row) {
				t.Errorf("priority %d: rows %v, want it in row %d", tc.priority, rows, tc.row)
			}
		}
	}
	if rows := Assign(nil, []*v1.Pod{pod("p", nil, "", nil)}); len(rows) != 0 {
		t.Errorf("no table: %v", rows)
	}
	// The two-row table: a manifest's node-critical pod is critical.
	two := Table(10*time.Second, 4*time.Second, nil)
	rows := Assign(two, []*v1.Pod{pod("app", nil, "", nil), pod("agent", nil, "system-node-critical", nil)})
	if len(rows[0]) != 1 || rows[0][0].Name != "app" || len(rows[1]) != 1 || rows[1][0].Name != "agent" {
		t.Errorf("rows %v, want app then agent", rows)
	}
}

func TestPodGrace(t *testing.T) {
	g := Group{Grace: 6 * time.Second}
	for _, tc := range []struct {
		name  string
		grace *int64
		want  time.Duration
	}{
		{"no spec grace", nil, 6 * time.Second},
		{"shorter spec grace wins", ptr.To[int64](2), 2 * time.Second},
		{"longer spec grace capped", ptr.To[int64](30), 6 * time.Second},
		{"zero", ptr.To[int64](0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodGrace(g, pod("p", nil, "", tc.grace)); got != tc.want {
				t.Errorf("PodGrace = %v, want %v", got, tc.want)
			}
		})
	}
}
