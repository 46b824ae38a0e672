package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

type fakeObjects struct {
	cms    map[string]*v1.ConfigMap
	tokens int
	clock  *clocktesting.FakeClock
}

func (f *fakeObjects) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	if cm, ok := f.cms[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f *fakeObjects) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	return &v1.Secret{Data: map[string][]byte{"password": []byte("s3cret")}}, nil
}

func (f *fakeObjects) Token(_ context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.tokens++
	now := f.clock.Now()
	return &authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now)}, Spec: req.Spec,
		Status: authenticationv1.TokenRequestStatus{Token: "token-" + string(rune('0'+f.tokens)),
			ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))}}, nil
}

func apiPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: v1.PodSpec{Volumes: []v1.Volume{{
		Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr.To(int32(0o644)), Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3607))}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}}, {
		Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "conf"},
			Items: []v1.KeyToPath{{Key: "a", Path: "dir/a.txt", Mode: ptr.To(int32(0o600))}}}}}, {
		Name: "opt", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"},
			Optional: ptr.To(true)}}},
	}}}
}

type nsDownward struct{}

func (nsDownward) FieldValue(pod *v1.Pod, path string) (string, error) { return pod.Namespace, nil }
func (nsDownward) ResourceValue(*v1.Pod, *v1.ResourceFieldSelector) (string, error) {
	return "", errors.New("unused")
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestAPIVolumes(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	objs := &fakeObjects{clock: clk, cms: map[string]*v1.ConfigMap{
		"kube-root-ca.crt": {Data: map[string]string{"ca.crt": "CA1"}},
		"conf":             {Data: map[string]string{"a": "one"}},
	}}
	m := NewManager(Config{RootDir: t.TempDir(), Clock: clk}, Deps{Downward: nsDownward{}, Objects: objs})
	pod := apiPod()
	ctx := context.Background()
	paths, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	sa := paths["kube-api-access"]
	for file, want := range map[string]string{"token": "token-1", "ca.crt": "CA1", "namespace": "ns"} {
		if got := read(t, filepath.Join(sa, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
		if target, err := os.Readlink(filepath.Join(sa, file)); err != nil || target != filepath.Join("..data", file) {
			t.Errorf("%s: link %q %v, want into ..data", file, target, err)
		}
	}
	conf := filepath.Join(paths["conf"], "dir", "a.txt")
	if got := read(t, conf); got != "one" {
		t.Errorf("conf = %q", got)
	}
	if fi, err := os.Stat(conf); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v %v, want 0600", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(paths["opt"]); len(entries) != 2 { // ..data and its directory
		t.Errorf("optional absent config map: %v, want an empty payload", entries)
	}

	// Nothing changed: nothing rewritten, no token asked.
	before, _ := os.Readlink(filepath.Join(sa, "..data"))
	clk.Step(time.Minute)
	if err := m.Refresh(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Readlink(filepath.Join(sa, "..data")); after != before || objs.tokens != 1 {
		t.Errorf("unchanged volume rewritten (%s → %s) or token requested (%d)", before, after, objs.tokens)
	}
	// An edit is swapped in whole; the old payload directory goes.
	objs.cms["kube-root-ca.crt"] = &v1.ConfigMap{Data: map[string]string{"ca.crt": "CA2"}}
	objs.cms["conf"] = &v1.ConfigMap{Data: map[string]string{"a": "two"}}
	if err := m.Refresh(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(sa, "ca.crt")); got != "CA2" || read(t, conf) != "two" {
		t.Errorf("after the edit: ca.crt %q conf %q", got, read(t, conf))
	}
	if _, err := os.Stat(filepath.Join(sa, before)); !os.IsNotExist(err) {
		t.Errorf("old payload %s left: %v", before, err)
	}
	// The token is renewed at 80 % of its life (3607 s), not before.
	clk.SetTime(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC).Add(2880 * time.Second))
	_ = m.Refresh(ctx, pod)
	if objs.tokens != 1 {
		t.Errorf("token renewed at 79.8 %% of its life")
	}
	clk.Step(10 * time.Second)
	_ = m.Refresh(ctx, pod)
	if objs.tokens != 2 || read(t, filepath.Join(sa, "token")) != "token-2" {
		t.Errorf("token not renewed at 80 %%: %d requests, %q", objs.tokens, read(t, filepath.Join(sa, "token")))
	}
	// Forgotten once the pod is gone: its tokens and digests go with it.
	m.Forget(pod.UID)
	if len(m.tokens) != 0 || len(m.written) != 0 {
		t.Errorf("after Forget: %d pods' tokens, %d pods' digests kept", len(m.tokens), len(m.written))
	}
}

// Standalone, a volume that needs the API server fails, naming what it
// would read.
func TestAPIVolumeWithoutAPIServer(t *testing.T) {
	m := NewManager(Config{RootDir: t.TempDir()}, Deps{Downward: nsDownward{}})
	pod := apiPod()
	pod.Spec.Volumes = pod.Spec.Volumes[1:2]
	_, err := m.Setup(context.Background(), pod)
	var se *SetupError
	if !errors.As(err, &se) || se.Volume != "conf" || !errors.Is(err, ErrNoAPIServer) || !strings.Contains(err.Error(), "config map ns/conf") {
		t.Errorf("err %v", err)
	}
}
