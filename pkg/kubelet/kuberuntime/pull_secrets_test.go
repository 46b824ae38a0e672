package kuberuntime

import (
	"context"
	"encoding/base64"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/images"
)

// imagePullSecrets are warned of once per pod (again when the list
// changes): the kubelet's warning event, not one per sync.
func TestPullSecretsWarnedOnce(t *testing.T) {
	rec := events.New("n")
	m := newTestManager(t, Config{NodeName: "n", InfraImage: "pause:1", Events: rec}, nil)
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	count := func() (n int, msg string) {
		for _, e := range rec.List().Items {
			if e.Reason == reasonPullSecrets {
				n += int(e.Count)
				msg = e.Message
			}
		}
		return n, msg
	}
	for _, c := range []struct {
		name    string
		secrets []string
		total   int
		message string
	}{
		{"none", nil, 0, ""},
		{"named", []string{"regcred", ""}, 1, "Unable to retrieve some image pull secrets (regcred); attempting to pull the image may not succeed."},
		{"same again", []string{"regcred", ""}, 1, "Unable to retrieve some image pull secrets (regcred); attempting to pull the image may not succeed."},
		{"changed", []string{"regcred", "other"}, 2, "Unable to retrieve some image pull secrets (regcred, other); attempting to pull the image may not succeed."},
	} {
		pod.Spec.ImagePullSecrets = nil
		for _, s := range c.secrets {
			pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
		}
		m.warnPullSecrets(pod, recordOf(m, pod.UID))
		if n, msg := count(); n != c.total || msg != c.message {
			t.Errorf("%s: %d warnings, last %q; want %d, %q", c.name, n, msg, c.total, c.message)
		}
	}
}

// fakeSecrets is the API server's secrets of namespace "default" as the
// node reads them: absent ones are NotFound, forbidden ones Forbidden.
type fakeSecrets struct {
	secrets   map[string]*v1.Secret
	forbidden map[string]bool
	reads     int
}

func (f *fakeSecrets) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	f.reads++
	if f.forbidden[name] {
		return nil, apierrors.NewForbidden(v1.Resource("secrets"), name, errors.New("no relationship found between node 'n' and this object"))
	}
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
}

func (f *fakeSecrets) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
}

func (f *fakeSecrets) Token(context.Context, string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return nil, errors.New("no tokens here")
}

func dockerConfigSecret(name, registry, user string) *v1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":pw"))
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths": {"` + registry + `": {"auth": "` + auth + `"}}}`)}}
}

func testSecrets() *fakeSecrets {
	return &fakeSecrets{secrets: map[string]*v1.Secret{
		"default/regcred": dockerConfigSecret("regcred", "reg.test", "alice"),
		"default/legacy": {ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "legacy"}, Type: v1.SecretTypeDockercfg,
			Data: map[string][]byte{v1.DockerConfigKey: []byte(`{"legacy.test": {"username": "bob", "password": "pw"}}`)}},
		"default/opaque": {ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "opaque"}, Type: v1.SecretTypeOpaque,
			Data: map[string][]byte{"password": []byte("x")}},
		"default/broken": {ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "broken"}, Type: v1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths": [`)}},
	}, forbidden: map[string]bool{"theirs": true}}
}

// The secrets a pod names are read in its namespace; those that cannot be
// read or parsed fail, one of a type without registry credentials is
// skipped, the others give their credentials.
func TestReadPullSecrets(t *testing.T) {
	for _, c := range []struct {
		name   string
		names  []string
		failed string
		creds  int
	}{
		{"dockerconfigjson", []string{"regcred"}, "", 1},
		{"dockercfg", []string{"legacy"}, "", 1},
		{"both", []string{"regcred", "legacy"}, "", 2},
		{"absent", []string{"absent", "regcred"}, "absent", 1},
		{"forbidden", []string{"theirs"}, "theirs", 0},
		{"malformed", []string{"broken", "legacy"}, "broken", 1},
		{"opaque skipped", []string{"opaque"}, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			creds, failed := readPullSecrets(context.Background(), testSecrets(), "default", c.names)
			var names []string
			for _, f := range failed {
				names = append(names, f.name)
				if f.err == nil {
					t.Errorf("%s failed without an error", f.name)
				}
			}
			if got := strings.Join(names, ", "); got != c.failed {
				t.Errorf("failed %q, want %q", got, c.failed)
			}
			if creds.Len() != c.creds {
				t.Errorf("%d credentials, want %d", creds.Len(), c.creds)
			}
		})
	}
}

// In node mode a pod's image is pulled with its secret's credential; a
// secret that cannot be read is warned of once (the kubelet's event), and
// the pull goes on with the others.
func TestNodeModePullsWithPodSecrets(t *testing.T) {
	rec := events.New("n")
	fake := containertest.NewFakeClient("pause:1")
	fake.RequireAuth("reg.test/app:1", "alice")
	secrets := testSecrets()
	m := newTestManager(t, Config{NodeName: "n", InfraImage: "pause:1", Events: rec, Objects: secrets}, fake)
	pod := containertest.Pod(v1.RestartPolicyAlways, "c")
	pod.Spec.Containers[0].Image, pod.Spec.Containers[0].ImagePullPolicy = "reg.test/app:1", v1.PullAlways
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "absent"}, {Name: "regcred"}, {Name: "opaque"}}
	m.images = images.NewManager(images.Config{Policy: images.Policy{}, InfraImage: "pause:1", RecordPath: filepath.Join(t.TempDir(), "images.json")}, images.Deps{Runtime: fake})
	m.probes, m.relist = noProbes{}, noRelist{}
	if _, err := m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID)); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got := fake.PullUsers("reg.test/app:1"); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("pulled as %q, want alice (the pod's secret)", got)
	}
	warnings := func() (n int, msg string) {
		for _, e := range rec.List().Items {
			if e.Reason == reasonPullSecrets {
				n += int(e.Count)
				msg = e.Message
			}
		}
		return n, msg
	}
	want := "Unable to retrieve some image pull secrets (absent); attempting to pull the image may not succeed."
	if n, msg := warnings(); n != 1 || msg != want {
		t.Errorf("%d warnings, last %q; want one, %q", n, msg, want)
	}
	// Again: no second warning for the same secrets (nor the standalone
	// one: there is an API server).
	m.warnPullSecrets(pod, recordOf(m, pod.UID))
	if creds := m.pullCredentials(context.Background(), pod, recordOf(m, pod.UID)); creds.Len() != 1 {
		t.Errorf("%d credentials, want regcred's", creds.Len())
	}
	if n, _ := warnings(); n != 1 {
		t.Errorf("%d warnings after another read, want still one", n)
	}
	// Once it can be read, a secret that fails again is warned of again.
	secrets.secrets["default/absent"] = dockerConfigSecret("absent", "other.test", "carol")
	m.pullCredentials(context.Background(), pod, recordOf(m, pod.UID))
	delete(secrets.secrets, "default/absent")
	m.pullCredentials(context.Background(), pod, recordOf(m, pod.UID))
	if n, _ := warnings(); n != 2 {
		t.Errorf("%d warnings after the secret came and went, want two", n)
	}
}
