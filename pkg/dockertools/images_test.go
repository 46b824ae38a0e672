package dockertools

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
)

func TestKeyring(t *testing.T) {
	dir := t.TempDir()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"auths": {
		"https://index.docker.io/v1/": {"auth": "`+b64("hub:pw")+`"},
		"registry.local:5000": {"auth": "`+b64("alice:one")+`"},
		"registry.local:5000/team": {"username": "bob", "password": "two"}
	}}`), 0o600)
	legacy := filepath.Join(dir, ".dockercfg")
	os.WriteFile(legacy, []byte(`{"127.0.0.1:5001": {"auth": "`+b64("carol:three")+`"}}`), 0o600)
	k, err := LoadKeyring(cfg, legacy, filepath.Join(dir, "missing.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		image string
		want  []string // usernames, in order
	}{
		{"busybox:1", []string{"hub"}},
		{"library/busybox", []string{"hub"}},
		{"docker.io/library/busybox", []string{"hub"}},
		{"registry.local:5000/app:1", []string{"alice"}},
		{"registry.local:5000/team/app:1", []string{"bob", "alice"}},
		{"127.0.0.1:5001/x", []string{"carol"}},
		{"other.example/x", nil},
	}
	for _, c := range cases {
		got := k.Lookup(c.image)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d credentials, want %v", c.image, len(got), c.want)
			continue
		}
		for i := range got {
			if got[i].Username != c.want[i] {
				t.Errorf("%s: credential %d is %s, want %s", c.image, i, got[i].Username, c.want[i])
			}
		}
	}
}

func TestRegistryHost(t *testing.T) {
	for image, want := range map[string]string{
		"busybox": "index.docker.io", "a/b": "index.docker.io", "localhost/x": "localhost",
		"127.0.0.1:5000/x": "127.0.0.1:5000", "gcr.io/p/i:1": "gcr.io",
	} {
		if got := RegistryHost(image); got != want {
			t.Errorf("RegistryHost(%s) = %s, want %s", image, got, want)
		}
	}
}
