package credentialprovider

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// users is the usernames of an image's credentials, in the order tried.
func users(k *Keyring, image string) string {
	var names []string
	for _, a := range k.Lookup(image) {
		names = append(names, a.Username)
	}
	return strings.Join(names, ",")
}

// The node's Docker config files, in both formats, matched as the
// kubelet's credential provider matches registries.
func TestLoadKeyring(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"auths": {
		"https://index.docker.io/v1/": {"auth": "`+b64("hub:pw")+`"},
		"registry.local:5000": {"auth": "`+b64("alice:one")+`"},
		"registry.local:5000/team": {"username": "bob", "password": "two"},
		"helped.example": {}
	}, "credsStore": "desktop"}`), 0o600)
	legacy := filepath.Join(dir, ".dockercfg")
	os.WriteFile(legacy, []byte(`{"127.0.0.1:5001": {"auth": "`+b64("carol:three")+`"}}`), 0o600)
	k, err := LoadKeyring(cfg, legacy, filepath.Join(dir, "missing.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ image, want string }{
		{"busybox:1", "hub"},
		{"library/busybox", "hub"},
		{"docker.io/library/busybox", "hub"},
		{"registry.local:5000/app:1", "alice"},
		{"registry.local:5000/team/app:1", "bob,alice"},
		{"127.0.0.1:5001/x", "carol"},
		{"helped.example/x", ""}, // an entry without a credential
		{"other.example/x", ""},
	} {
		t.Run(c.image, func(t *testing.T) {
			if got := users(k, c.image); got != c.want {
				t.Errorf("credentials %q, want %q", got, c.want)
			}
		})
	}
	if n := k.Len(); n != 4 {
		t.Errorf("Len %d, want 4", n)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"auths": {"reg.example": {"auth": "not base64!"}}}`), 0o600)
	if _, err := LoadKeyring(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a malformed auth: %v, want an error naming the file", err)
	}
}

// Registry matching: host parts (globs among them), port, path prefix,
// Docker Hub's aliases, most specific key first.
func TestLookupMatching(t *testing.T) {
	for _, c := range []struct {
		name  string
		keys  []string // each key's username is its index
		image string
		want  string
	}{
		{"bare host", []string{"reg.example"}, "reg.example/app:1", "0"},
		{"scheme and version stripped", []string{"https://reg.example/v2/"}, "reg.example/app", "0"},
		{"other host", []string{"reg.example"}, "other.example/app", ""},
		{"port must match", []string{"reg.example:5000"}, "reg.example/app", ""},
		{"port matches", []string{"reg.example:5000"}, "reg.example:5000/app", "0"},
		{"port missing in image", []string{"reg.example"}, "reg.example:5000/app", ""},
		{"glob part", []string{"*.example"}, "reg.example/app", "0"},
		{"glob spans one part only", []string{"*.example"}, "a.reg.example/app", ""},
		{"literal before glob", []string{"*.example", "reg.example"}, "reg.example/app", "1,0"},
		{"path first", []string{"reg.example", "reg.example/team"}, "reg.example/team/app", "1,0"},
		{"path elsewhere", []string{"reg.example/team"}, "reg.example/other/app", ""},
		{"tag no part of the path", []string{"reg.example/app:1"}, "reg.example/app:1", ""},
		{"digest", []string{"reg.example/app"}, "reg.example/app@sha256:ab", "0"},
		{"localhost", []string{"localhost:5000"}, "localhost:5000/x", "0"},
		{"hub key docker.io", []string{"docker.io"}, "busybox", "0"},
		{"hub key registry-1", []string{"https://registry-1.docker.io"}, "user/app", "0"},
		{"hub image index.docker.io", []string{"https://index.docker.io/v1/"}, "index.docker.io/user/app", "0"},
		{"hub official image path", []string{"docker.io/library"}, "busybox", "0"},
		{"hub user path", []string{"docker.io/user"}, "docker.io/user/app", "0"},
		{"hub key not for a registry", []string{"docker.io"}, "reg.example/app", ""},
		{"case of the host", []string{"Reg.Example"}, "reg.example/app", "0"},
		{"two spellings of one registry", []string{"reg.example", "http://reg.example/v2/"}, "reg.example/app", "1,0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := dockerConfig{}
			for i, key := range c.keys {
				cfg[key] = configEntry{Username: string(rune('0' + i)), Password: "pw"}
			}
			k := &Keyring{}
			k.add(cfg)
			if got := users(k, c.image); got != c.want {
				t.Errorf("keys %v, image %s: credentials %q, want %q", c.keys, c.image, got, c.want)
			}
		})
	}
	var none *Keyring
	if got := none.Lookup("busybox"); got != nil || none.Len() != 0 {
		t.Errorf("a nil keyring: %v", got)
	}
}

func TestRegistryHost(t *testing.T) {
	for image, want := range map[string]string{
		"busybox": "index.docker.io", "a/b": "index.docker.io", "docker.io/a/b": "index.docker.io", "localhost/x": "localhost",
		"127.0.0.1:5000/x": "127.0.0.1:5000", "gcr.io/p/i:1": "gcr.io",
	} {
		if got := RegistryHost(image); got != want {
			t.Errorf("RegistryHost(%s) = %s, want %s", image, got, want)
		}
	}
}
