package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(kc, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		check   func(o *Options) bool
		wantErr string
	}{
		{"defaults", []string{"--hostname-override", "N1"}, func(o *Options) bool {
			return o.HostnameOverride == "n1" && o.RootDir == "/var/lib/kubelet" && o.SyncFrequency == 10*time.Second &&
				o.FileCheckFrequency == 20*time.Second && o.RelistPeriod == time.Second && o.PodInfraContainerImage == DefaultInfraImage
		}, ""},
		{"underscores accepted", []string{"--pod_manifest_path", dir, "--sync_frequency=3s", "--hostname_override=x"}, func(o *Options) bool {
			return o.PodManifestPath == dir && o.SyncFrequency == 3*time.Second
		}, ""},
		{"--config is the manifest path", []string{"--config", dir, "--hostname-override=x"}, func(o *Options) bool { return o.PodManifestPath == dir }, ""},
		{"KubeletConfiguration refused with a hint", []string{"--config", kc, "--hostname-override=x"}, nil, "KubeletConfiguration"},
		{"bad duration", []string{"--relist-period=0s", "--hostname-override=x"}, nil, "--relist-period must be positive"},
		{"stray argument", []string{"--hostname-override=x", "extra"}, nil, "unexpected arguments"},
		{"node name with a slash refused", []string{"--hostname-override=../etc"}, nil, "node name"},
		{"glog verbosity", []string{"--hostname-override=x", "-v", "3"}, func(o *Options) bool { return true }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := ParseFlags(c.args)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(o) {
				t.Errorf("options %+v", o)
			}
		})
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) string {
		p := filepath.Join(dir, "kubelet.yaml")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("hostname-override: from-file\nsync-frequency: 7s\nrelist_period: 2s\nmanifest-url-header: ['A: 1', 'B: 2']\nport: 0\n")
	o, err := ParseFlags([]string{"--kubelet-config", p, "--sync-frequency", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if o.HostnameOverride != "from-file" || o.SyncFrequency != 3*time.Second || o.RelistPeriod != 2*time.Second ||
		len(o.ManifestURLHeader) != 2 || o.Port != 0 || o.ConfigFile != p {
		t.Errorf("options %+v", o)
	}
	for content, want := range map[string]string{
		"no-such-flag: 1\n":        `unknown key "no-such-flag"`,
		"sync-frequency: soon\n":   "sync-frequency",
		"port: 1\nport: 2\n":       "already",
		"kubelet-config: x.yaml\n": "unknown key",
	} {
		if _, err := ParseFlags([]string{"--kubelet-config", write(content), "--hostname-override", "x"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: err %v, want %q", content, err, want)
		}
	}
	if _, err := ParseFlags([]string{"--version"}); err != ErrVersion {
		t.Errorf("--version: %v", err)
	}
}
