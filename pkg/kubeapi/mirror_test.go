package kubeapi

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

func staticPod(env string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "static-uid",
		Annotations: map[string]string{api.ConfigSourceAnnotation: api.SourceFile}},
		Spec:   v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "i", Env: []v1.EnvVar{{Name: "V", Value: env}}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning}}
}

func TestMirrors(t *testing.T) {
	ctx := context.Background()
	newWriter := func(static []*v1.Pod, seen bool, objs ...*v1.Pod) (*StatusWriter, *fake.Clientset, *[]string) {
		c := fake.NewClientset()
		for _, o := range objs {
			_, _ = c.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		var refused []string
		w := NewStatusWriter(c, &fakeLocal{pods: static}, &fakeRemote{c: c}, &Mirrors{
			NodeUID:     func() types.UID { return "node-uid" },
			SourcesSeen: func() bool { return seen },
			Refused:     func(p *v1.Pod, why string) { refused = append(refused, p.Name+": "+why) },
		})
		return w, c, &refused
	}
	get := func(c *fake.Clientset) *v1.Pod {
		p, err := c.CoreV1().Pods("ns").Get(ctx, "s", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return p
	}

	t.Run("created with owner, hash and status", func(t *testing.T) {
		w, c, _ := newWriter([]*v1.Pod{staticPod("1")}, true)
		w.sync(ctx)
		m := get(c)
		if m == nil || m.Annotations[api.MirrorAnnotation] != mirrorHash(staticPod("1")) || len(m.OwnerReferences) != 1 ||
			m.OwnerReferences[0].UID != "node-uid" || !*m.OwnerReferences[0].Controller {
			t.Fatalf("mirror %+v", m)
		}
		w.sync(ctx) // the status, onto the mirror
		if m = get(c); m.Status.Phase != v1.PodRunning {
			t.Errorf("mirror status %+v", m.Status)
		}
		before := len(c.Actions())
		w.sync(ctx)
		if n := len(c.Actions()) - before; n != 1 { // the fake's list of the remote view
			t.Errorf("%d requests in a steady state, want none but the fake's list", n-1)
		}
	})
	t.Run("changed static pod: replaced", func(t *testing.T) {
		old := staticPod("1")
		m := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "mirror-1",
			Annotations: map[string]string{api.MirrorAnnotation: mirrorHash(old)}}}
		w, c, _ := newWriter([]*v1.Pod{staticPod("2")}, true, m)
		w.sync(ctx)
		if get(c) != nil {
			t.Fatalf("stale mirror kept")
		}
		w.sync(ctx)
		if got := get(c); got == nil || got.Annotations[api.MirrorAnnotation] != mirrorHash(staticPod("2")) {
			t.Errorf("new mirror %+v", got)
		}
	})
	t.Run("orphan deleted only once the sources delivered", func(t *testing.T) {
		m := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "mirror-1",
			Annotations: map[string]string{api.MirrorAnnotation: "x"}}}
		w, c, _ := newWriter(nil, false, m)
		w.sync(ctx)
		if get(c) == nil {
			t.Fatalf("orphan deleted before the sources delivered")
		}
		w.mirrors.SourcesSeen = func() bool { return true }
		w.sync(ctx)
		if get(c) != nil {
			t.Errorf("orphan kept")
		}
	})
	t.Run("refused for a secret, once", func(t *testing.T) {
		p := staticPod("1")
		p.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}}}
		w, c, refused := newWriter([]*v1.Pod{p}, true)
		w.sync(ctx)
		w.sync(ctx)
		if get(c) != nil || len(*refused) != 1 {
			t.Errorf("mirror %v, refusals %v", get(c), *refused)
		}
	})
}
