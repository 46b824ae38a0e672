package kuberuntime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cases follow the kubelet's own (pkg/kubelet/util/env/env_util_test.go,
// v1.37.2): the same file gives the same value or the same error.
func TestParseEnvFile(t *testing.T) {
	cases := []struct {
		name, content, key, want, wantErr string
	}{
		{"leading whitespace ignored", "   A='1'\n\t\tB='2'\n", "B", "2", ""},
		{"blank and comment lines", "# c\n\nA='x'\n   # c2\n\t\nB='y'\n", "B", "y", ""},
		{"whitespace before = refused", "A = '1'\nB='2'\n", "B", "", "at line 1: whitespace before '=' is not allowed"},
		{"space after = is an empty value", "A= 'x'\n", "A", "", ""},
		{"space after = on another key skipped", "A= 'x'\nB='y'\n", "B", "y", ""},
		{"absent key is empty", "A='1'\n", "C", "", ""},
		{"# inside quotes is literal", "A='x#y'\n", "A", "x#y", ""},
		{"quotes keep spaces", "A='   foo bar   '\n", "A", "   foo bar   ", ""},
		{"multiple = in value", "A='a=b=c'\n", "A", "a=b=c", ""},
		{"comment after the quote", "A='v' # note\n", "A", "v", ""},
		{"no expansion", "A='$HOME-${X}_$'\n", "A", "$HOME-${X}_$", ""},
		{"empty name", "='v'\nB='2'\n", "B", "", "at line 1: empty variable name"},
		{"missing =", "A='1'\nBROKEN\nB='2'\n", "B", "", "at line 2: missing '='"},
		{"unquoted value", "A=plain\n", "A", "", "at line 1: value must be enclosed in single quotes"},
		{"double quotes", "A=\"v\"\n", "A", "", "value must be enclosed in single quotes"},
		{"adjacent quoted strings", "A='foo''bar'", "A", "", "unexpected content after closing quote"},
		{"content after the quote", "A='v'x\n", "A", "", "at line 1: unexpected content after closing quote"},
		{"multi-line value", "A='line one\n  line two\n'\nB='2'\n", "A", "line one\n  line two\n", ""},
		{"unclosed quote", "A='1'\nB='open\nline\n", "B", "", "starting at line 2: unclosed single quote"},
		{"an error after the key is not reached", "A='1'\nBROKEN\n", "A", "1", ""},
		{"a line past 64 KiB", "A='" + strings.Repeat("x", 70<<10) + "'\n", "A", "", "token too long"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseEnvFile(strings.NewReader(tc.content), tc.key)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestFileKey(t *testing.T) {
	vol := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(vol, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vol, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("conf/app.env", "DB_HOST='db.local'\nEMPTY=''\n")
	write("bad.env", "DB_HOST=unquoted\n")
	outside := filepath.Join(t.TempDir(), "secret.env")
	if err := os.WriteFile(outside, []byte("DB_HOST='stolen'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(vol, "link.env")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(vol, "fifo.env"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostPaths := map[string]string{"cfg": vol}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	yes := true
	cases := []struct {
		name      string
		ref       v1.FileKeySelector
		want      string
		wantFound bool
		wantErr   string // the whole message, as the kubelet's (pkg/kubelet/kubelet_pods.go)
	}{
		{"value", v1.FileKeySelector{VolumeName: "cfg", Path: "conf/app.env", Key: "DB_HOST"}, "db.local", true, ""},
		{"missing key", v1.FileKeySelector{VolumeName: "cfg", Path: "conf/app.env", Key: "PORT"}, "", false,
			`environment variable key "PORT" not found in file "` + filepath.Join(vol, "conf/app.env") + `"`},
		{"missing key, optional", v1.FileKeySelector{VolumeName: "cfg", Path: "conf/app.env", Key: "PORT", Optional: &yes}, "", false, ""},
		{"empty value counts as missing", v1.FileKeySelector{VolumeName: "cfg", Path: "conf/app.env", Key: "EMPTY"}, "", false,
			`environment variable key "EMPTY" not found in file "` + filepath.Join(vol, "conf/app.env") + `"`},
		{"missing file, even optional", v1.FileKeySelector{VolumeName: "cfg", Path: "none.env", Key: "K", Optional: &yes}, "", false, "couldn't parse env file"},
		{"malformed file", v1.FileKeySelector{VolumeName: "cfg", Path: "bad.env", Key: "DB_HOST"}, "", false, "couldn't parse env file"},
		{"symlink not followed", v1.FileKeySelector{VolumeName: "cfg", Path: "link.env", Key: "DB_HOST"}, "", false, "couldn't parse env file"},
		{"fifo not read", v1.FileKeySelector{VolumeName: "cfg", Path: "fifo.env", Key: "DB_HOST"}, "", false, "couldn't parse env file"},
		{"unknown volume", v1.FileKeySelector{VolumeName: "other", Path: "a.env", Key: "K"}, "", false,
			`cannot find the volume "other" referenced by FileKeyRef`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := fileKey(pod, &tc.ref, hostPaths)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || found != tc.wantFound {
				t.Fatalf("got %q, %v, %v; want %q, %v", got, found, err, tc.want, tc.wantFound)
			}
		})
	}
}

// A fileKeyRef variable takes its place in the container's env and may be
// referred to by the variables after it; its error is the kubelet's text,
// not prefixed with the variable's name as the agent's other env errors.
func TestContainerEnvFileKeyRef(t *testing.T) {
	m := newTestManager(t, Config{NodeName: "node-1"}, nil)
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "app.env"), []byte("DB_HOST='db.local'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := func(key string) *v1.EnvVarSource {
		return &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "cfg", Path: "app.env", Key: key}}
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Env: []v1.EnvVar{
			{Name: "DB", ValueFrom: ref("DB_HOST")},
			{Name: "URL", Value: "tcp://$(DB):5432"},
		}}}}}
	env, _, err := m.containerEnv(context.Background(), pod, &pod.Spec.Containers[0], "", map[string]string{"cfg": vol})
	if got := strings.Join(env, " "); err != nil || got != "DB=db.local URL=tcp://db.local:5432" {
		t.Errorf("env = %q, %v", got, err)
	}
	pod.Spec.Containers[0].Env[0].ValueFrom = ref("PORT")
	_, _, err = m.containerEnv(context.Background(), pod, &pod.Spec.Containers[0], "", map[string]string{"cfg": vol})
	if want := `environment variable key "PORT" not found in file "` + filepath.Join(vol, "app.env") + `"`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}
