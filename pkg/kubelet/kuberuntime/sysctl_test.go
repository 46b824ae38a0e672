package kuberuntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestSysctlAllowlist(t *testing.T) {
	for _, tc := range []struct {
		name                string
		unsafe              []string
		sysctl              string
		hostNet, hostIPC    bool
		wantErr, wantReject string
	}{
		{name: "safe", sysctl: "net.ipv4.ip_local_port_range"},
		{name: "safe, slashes", sysctl: "net/ipv4/tcp_syncookies"},
		{name: "unsafe refused", sysctl: "kernel.msgmax", wantReject: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "unsafe allowed by prefix", unsafe: []string{"kernel.msg*"}, sysctl: "kernel.msgmax"},
		{name: "unsafe allowed by name", unsafe: []string{"net.core.somaxconn"}, sysctl: "net.core.somaxconn"},
		{name: "net under hostNetwork", sysctl: "net.ipv4.tcp_syncookies", hostNet: true,
			wantReject: `forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled`},
		{name: "ipc under hostIPC", sysctl: "kernel.shm_rmid_forced", hostIPC: true,
			wantReject: `forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host ipc enabled`},
		{name: "not namespaced", unsafe: []string{"vm.swappiness"}, wantErr: `the sysctl "vm.swappiness" is not known to be namespaced`},
		{name: "bad pattern", unsafe: []string{"net.*.x"}, wantErr: "must have at most 253 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewSysctlAllowlist(tc.unsafe)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: tc.hostNet, HostIPC: tc.hostIPC,
				SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: tc.sysctl, Value: "1"}}}}}
			r := w.admit(pod)
			switch {
			case tc.wantReject == "" && r != nil:
				t.Errorf("rejected: %+v", r)
			case tc.wantReject != "" && (r == nil || r.Reason != "SysctlForbidden" || r.Message != tc.wantReject):
				t.Errorf("rejection %+v, want %q", r, tc.wantReject)
			}
		})
	}
}

func TestSysctlDots(t *testing.T) {
	for in, want := range map[string]string{
		"net.ipv4.tcp_rmem":                "net.ipv4.tcp_rmem",
		"net/ipv4/tcp_rmem":                "net.ipv4.tcp_rmem",
		"net/ipv4/conf/eno2.100/rp_filter": "net.ipv4.conf.eno2/100.rp_filter",
	} {
		if got := sysctlDots(in); got != want {
			t.Errorf("sysctlDots(%q) = %q, want %q", in, got, want)
		}
	}
}
