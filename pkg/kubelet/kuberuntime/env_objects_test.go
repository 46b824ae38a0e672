package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// fakeObjects is an API server with config maps and secrets by
// namespace/name; a name in broken fails with a server error.
type fakeObjects struct {
	configMaps map[string]map[string]string
	secrets    map[string]map[string]string
	broken     map[string]bool
}

func (o fakeObjects) ConfigMap(_ context.Context, namespace, name string) (*v1.ConfigMap, error) {
	if o.broken[name] {
		return nil, errors.New("server error")
	}
	d, ok := o.configMaps[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	return &v1.ConfigMap{Data: d}, nil
}

func (o fakeObjects) Secret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	if o.broken[name] {
		return nil, errors.New("server error")
	}
	d, ok := o.secrets[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	s := &v1.Secret{Data: map[string][]byte{}}
	for k, v := range d {
		s.Data[k] = []byte(v)
	}
	return s, nil
}

func (o fakeObjects) Token(context.Context, string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return nil, errors.New("no tokens")
}

// The environment from config maps and secrets: envFrom keys with their
// prefix (invalid names left out, a later source winning), key references,
// optional sources that are absent, and the failures that stop the
// container, as the kubelet's.
func TestContainerEnvFromObjects(t *testing.T) {
	objs := fakeObjects{
		configMaps: map[string]map[string]string{"ns/cm": {"A": "cm-a", "B": "cm-b", "bad=name": "x"}},
		secrets:    map[string]map[string]string{"ns/sec": {"B": "sec-b", "PASS": "hunter2"}},
		broken:     map[string]bool{"down": true},
	}
	yes := true
	cmRef := func(name string, opt *bool) v1.EnvFromSource {
		return v1.EnvFromSource{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: opt}}
	}
	secRef := func(name, prefix string, opt *bool) v1.EnvFromSource {
		return v1.EnvFromSource{Prefix: prefix, SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: opt}}
	}
	cmKey := func(env, name, key string, opt *bool) v1.EnvVar {
		return v1.EnvVar{Name: env, ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: opt}}}
	}
	secKey := func(env, name, key string, opt *bool) v1.EnvVar {
		return v1.EnvVar{Name: env, ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: opt}}}
	}
	cases := []struct {
		name    string
		objects volumes.Objects
		from    []v1.EnvFromSource
		env     []v1.EnvVar
		want    string
		wantErr string
	}{
		{"envFrom: sorted keys, invalid names left out, later source wins", objs,
			[]v1.EnvFromSource{cmRef("cm", nil), secRef("sec", "", nil)}, nil, "A=cm-a B=sec-b PASS=hunter2", ""},
		{"envFrom prefix", objs, []v1.EnvFromSource{secRef("sec", "S_", nil)}, nil, "S_B=sec-b S_PASS=hunter2", ""},
		{"envFrom prefix starting with a digit, or with $ (relaxed names)", objs,
			[]v1.EnvFromSource{secRef("sec", "1-", nil), secRef("sec", "$_-", nil)}, nil, "1-B=sec-b 1-PASS=hunter2 $_-B=sec-b $_-PASS=hunter2", ""},
		{"env names a variable again: env's value", objs,
			[]v1.EnvFromSource{cmRef("cm", nil)}, []v1.EnvVar{{Name: "A", Value: "own $(B)"}}, "B=cm-b A=own cm-b", ""},
		{"optional absent source: nothing", objs, []v1.EnvFromSource{cmRef("gone", &yes), secRef("gone", "", &yes)}, nil, "", ""},
		{"required absent config map fails", objs, []v1.EnvFromSource{cmRef("gone", nil)}, nil, "", "config map ns/gone"},
		{"required absent secret fails", objs, []v1.EnvFromSource{secRef("gone", "", nil)}, nil, "", "secret ns/gone"},
		{"server error fails even if optional", objs, []v1.EnvFromSource{cmRef("down", &yes)}, nil, "", "server error"},
		{"key references", objs, nil, []v1.EnvVar{cmKey("X", "cm", "A", nil), secKey("Y", "sec", "PASS", nil)}, "X=cm-a Y=hunter2", ""},
		{"optional missing key or object: no variable", objs, nil,
			[]v1.EnvVar{cmKey("X", "cm", "nokey", &yes), secKey("Y", "gone", "k", &yes), {Name: "Z", Value: "z"}}, "Z=z", ""},
		{"required missing key fails, named", objs, nil, []v1.EnvVar{secKey("Y", "sec", "nokey", nil)}, "", "env Y: couldn't find key nokey in Secret ns/sec"},
		{"required missing config map key fails", objs, nil, []v1.EnvVar{cmKey("X", "cm", "nokey", nil)}, "", "couldn't find key nokey in ConfigMap ns/cm"},
		{"no API server", nil, nil, []v1.EnvVar{cmKey("X", "cm", "A", nil)}, "", volumes.ErrNoAPIServer.Error()},
		{"no API server for envFrom", nil, []v1.EnvFromSource{secRef("sec", "", nil)}, nil, "", volumes.ErrNoAPIServer.Error()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newTestManager(t, Config{Objects: c.objects}, nil)
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", EnvFrom: c.from, Env: c.env}}}}
			env, _, err := m.containerEnv(context.Background(), pod, &pod.Spec.Containers[0], "", nil)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(env, " "); got != c.want {
				t.Errorf("env %q, want %q", got, c.want)
			}
		})
	}
}

// The downward values of volume files: fields and resources, with the
// labels and annotations rendered as key="value" lines, sorted.
func TestDownwardValues(t *testing.T) {
	d := NewDownward(DownwardNode{Name: "n1", CPUs: 2, Memory: 1 << 30, RootDir: t.TempDir()})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u",
		Labels: map[string]string{"b": "2", "a": "1"}, Annotations: map[string]string{"q": `say "hi"`}},
		Spec: v1.PodSpec{ServiceAccountName: "sa", Containers: []v1.Container{{Name: "c",
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}}}}}}
	for path, want := range map[string]string{
		"metadata.labels":           "a=\"1\"\nb=\"2\"",
		"metadata.annotations":      `q="say \"hi\""`,
		"metadata.annotations['q']": `say "hi"`,
		"metadata.labels['none']":   "",
		"metadata.uid":              "u",
		"metadata.namespace":        "ns",
		"spec.serviceAccountName":   "sa",
		"spec.nodeName":             "n1",
		"status.podIP":              "", // volume files have no pod IP
	} {
		if got, err := d.FieldValue(pod, path); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", path, got, err, want)
		}
	}
	if _, err := d.FieldValue(pod, "spec.nope"); err == nil {
		t.Error("an unsupported field path resolved")
	}
	milli := resource.MustParse("1m")
	mi := resource.MustParse("1Mi")
	for _, c := range []struct {
		ref  v1.ResourceFieldSelector
		want string
	}{
		{v1.ResourceFieldSelector{ContainerName: "c", Resource: "requests.cpu", Divisor: milli}, "250"},
		{v1.ResourceFieldSelector{ContainerName: "c", Resource: "requests.cpu"}, "1"}, // rounded up
		{v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.cpu"}, "2"},   // the node's
		{v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory", Divisor: mi}, "100"},
		{v1.ResourceFieldSelector{ContainerName: "c", Resource: "requests.memory", Divisor: mi}, "100"}, // the limit
	} {
		if got, err := d.ResourceValue(pod, &c.ref); err != nil || got != c.want {
			t.Errorf("%s/%s: %q %v, want %q", c.ref.Resource, c.ref.Divisor.String(), got, err, c.want)
		}
	}
	if _, err := d.ResourceValue(pod, &v1.ResourceFieldSelector{ContainerName: "other", Resource: "limits.cpu"}); err == nil {
		t.Error("a resource of a container not in the pod resolved")
	}
	ref := &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.ephemeral-storage"}
	if got, err := d.ResourceValue(pod, ref); err != nil || got == "0" || got == "" {
		t.Errorf("ephemeral storage limit %q %v, want the root dir's file system size", got, err)
	}
}
