package volumes

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// Plugin directories of the volumes the agent writes from API objects.
const (
	projectedPlugin = "kubernetes.io~projected"
	configMapPlugin = "kubernetes.io~configmap"
	secretPlugin    = "kubernetes.io~secret"
)

// Objects reads what configMap, secret and projected volumes name from the
// API server, one object at a time (the Node authorizer allows a node the
// objects its pods reference, and no list), and requests service account
// tokens bound to pods.
type Objects interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	Token(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// ErrNoAPIServer is a volume or variable that needs an API server on an
// agent that has none.
var ErrNoAPIServer = errors.New("no API server (--kubeconfig)")

// file is one file of a volume's payload.
type file struct {
	data []byte
	mode os.FileMode
}

// apiVolume reports whether the agent writes the volume from API objects
// (and mounts it read-only, as the kubelet does).
func apiVolume(v *v1.Volume) (plugin string, ok bool) {
	switch {
	case v.Projected != nil:
		return projectedPlugin, true
	case v.ConfigMap != nil:
		return configMapPlugin, true
	case v.Secret != nil:
		return secretPlugin, true
	}
	return "", false
}

// tokenRefresh is when a token is requested again: at 80 % of its life, or
// after 24 hours, as the kubelet's token manager.
func tokenRefresh(t *authenticationv1.TokenRequest) time.Time {
	issued := t.CreationTimestamp.Time
	exp := t.Status.ExpirationTimestamp.Time
	ttl := exp.Sub(issued)
	if issued.IsZero() || ttl <= 0 {
		ttl = time.Duration(*t.Spec.ExpirationSeconds) * time.Second
		issued = exp.Add(-ttl)
	}
	at := issued.Add(ttl * 8 / 10)
	if day := issued.Add(24 * time.Hour); day.Before(at) {
		at = day
	}
	return at
}

// token returns the pod's token for a serviceAccountToken projection,
// requested again once due.
func (m *Manager) token(ctx context.Context, pod *v1.Pod, vol string, src *v1.ServiceAccountTokenProjection) ([]byte, error) {
	key := tokenKey{vol, src.Audience, src.Path}
	now := m.now()
	m.mu.Lock()
	t, ok := m.tokens[pod.UID][key]
	m.mu.Unlock()
	if ok && now.Before(tokenRefresh(t)) {
		return []byte(t.Status.Token), nil
	}
	exp := int64(3600)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	var audiences []string
	if src.Audience != "" {
		audiences = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}
	got, err := m.objects.Token(ctx, pod.Namespace, sa, req)
	if err != nil {
		if ok && now.Before(t.Status.ExpirationTimestamp.Time) {
			return []byte(t.Status.Token), nil // still valid: keep it, retry at the next refresh
		}
		return nil, fmt.Errorf("request a token of service account %s/%s: %w", pod.Namespace, sa, err)
	}
	if got.Spec.ExpirationSeconds == nil {
		got.Spec.ExpirationSeconds = &exp
	}
	if got.CreationTimestamp.IsZero() {
		got.CreationTimestamp = metav1.NewTime(now)
	}
	m.mu.Lock()
	if m.tokens[pod.UID] == nil {
		m.tokens[pod.UID] = map[tokenKey]*authenticationv1.TokenRequest{}
	}
	m.tokens[pod.UID][key] = got
	m.mu.Unlock()
	return []byte(got.Status.Token), nil
}

func (m *Manager) now() time.Time { return m.clock.Now() }

// keyed is a config map's or secret's data, by key.
type keyed map[string][]byte

// project adds the object's keys (items, or every key) to out under their
// paths; a missing key is an error unless optional.
func project(out map[string]file, data keyed, items []v1.KeyToPath, mode os.FileMode, optional bool, what string) error {
	if len(items) == 0 {
		for k, v := range data {
			out[k] = file{v, mode}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("configuration of %s has no key %q", what, it.Key)
		}
		md := mode
		if it.Mode != nil {
			md = os.FileMode(*it.Mode)
		}
		out[it.Path] = file{v, md}
	}
	return nil
}

func (m *Manager) configMapData(ctx context.Context, ns, name string) (keyed, error) {
	if m.objects == nil {
		return nil, fmt.Errorf("%w to read config map %s/%s", ErrNoAPIServer, ns, name)
	}
	cm, err := m.objects.ConfigMap(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	out := keyed{}
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		out[k] = v
	}
	return out, nil
}

func (m *Manager) secretData(ctx context.Context, ns, name string) (keyed, error) {
	if m.objects == nil {
		return nil, fmt.Errorf("%w to read secret %s/%s", ErrNoAPIServer, ns, name)
	}
	s, err := m.objects.Secret(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return keyed(s.Data), nil
}

// source reads one config map or secret for a volume: a missing optional
// one is empty.
func source(read func() (keyed, error), optional *bool) (keyed, error) {
	data, err := read()
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return keyed{}, nil
	}
	return data, err
}

// payload is what the volume holds now.
func (m *Manager) payload(ctx context.Context, pod *v1.Pod, v *v1.Volume) (map[string]file, error) {
	out := map[string]file{}
	modeOf := func(p *int32) os.FileMode {
		if p == nil {
			return 0o644
		}
		return os.FileMode(*p)
	}
	switch {
	case v.ConfigMap != nil:
		src := v.ConfigMap
		data, err := source(func() (keyed, error) { return m.configMapData(ctx, pod.Namespace, src.Name) }, src.Optional)
		if err != nil {
			return nil, err
		}
		return out, project(out, data, src.Items, modeOf(src.DefaultMode), src.Optional != nil && *src.Optional, "config map "+src.Name)
	case v.Secret != nil:
		src := v.Secret
		data, err := source(func() (keyed, error) { return m.secretData(ctx, pod.Namespace, src.SecretName) }, src.Optional)
		if err != nil {
			return nil, err
		}
		return out, project(out, data, src.Items, modeOf(src.DefaultMode), src.Optional != nil && *src.Optional, "secret "+src.SecretName)
	}
	mode := modeOf(v.Projected.DefaultMode)
	for i, s := range v.Projected.Sources {
		switch {
		case s.ConfigMap != nil:
			c := s.ConfigMap
			data, err := source(func() (keyed, error) { return m.configMapData(ctx, pod.Namespace, c.Name) }, c.Optional)
			if err == nil {
				err = project(out, data, c.Items, mode, c.Optional != nil && *c.Optional, "config map "+c.Name)
			}
			if err != nil {
				return nil, err
			}
		case s.Secret != nil:
			c := s.Secret
			data, err := source(func() (keyed, error) { return m.secretData(ctx, pod.Namespace, c.Name) }, c.Optional)
			if err == nil {
				err = project(out, data, c.Items, mode, c.Optional != nil && *c.Optional, "secret "+c.Name)
			}
			if err != nil {
				return nil, err
			}
		case s.DownwardAPI != nil:
			for _, it := range s.DownwardAPI.Items {
				var val string
				var err error
				if it.FieldRef != nil {
					val, err = m.downward.FieldValue(pod, it.FieldRef.FieldPath)
				} else {
					val, err = m.downward.ResourceValue(pod, it.ResourceFieldRef)
				}
				if err != nil {
					return nil, fmt.Errorf("%s: %w", it.Path, err)
				}
				md := mode
				if it.Mode != nil {
					md = os.FileMode(*it.Mode)
				}
				out[it.Path] = file{[]byte(val), md}
			}
		case s.ServiceAccountToken != nil:
			if m.objects == nil {
				return nil, fmt.Errorf("%w to request a service account token", ErrNoAPIServer)
			}
			tok, err := m.token(ctx, pod, v.Name, s.ServiceAccountToken)
			if err != nil {
				return nil, err
			}
			out[s.ServiceAccountToken.Path] = file{tok, mode}
		case s.ClusterTrustBundle != nil:
			data, err := m.trustAnchors(ctx, s.ClusterTrustBundle)
			if err != nil {
				return nil, err
			}
			out[s.ClusterTrustBundle.Path] = file{data, mode}
		case s.PodCertificate != nil:
			src := s.PodCertificate
			key, chain, err := m.podCertificate(ctx, pod, certKey{v.Name, i}, src)
			if err != nil {
				return nil, err
			}
			md := mode
			if fsGroup(pod) >= 0 {
				md = 0o600 // the kubelet's: the key is the owner's (and, with the writer's fsGroup rule, the group's)
			}
			if src.CredentialBundlePath != "" {
				out[src.CredentialBundlePath] = file{append(append([]byte{}, key...), chain...), md}
			}
			if src.KeyPath != "" {
				out[src.KeyPath] = file{key, md}
			}
			if src.CertificateChainPath != "" {
				out[src.CertificateChainPath] = file{chain, md}
			}
		}
	}
	return out, nil
}

// digest identifies a payload, to rewrite a volume only when it changed.
func digest(p map[string]file, gid int) [32]byte {
	paths := make([]string, 0, len(p))
	for k := range p {
		paths = append(paths, k)
	}
	sort.Strings(paths)
	h := sha256.New()
	fmt.Fprintf(h, "gid %d\n", gid)
	for _, k := range paths {
		fmt.Fprintf(h, "%q %o %d\n", k, p[k].mode, len(p[k].data))
		h.Write(p[k].data)
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

// writeAPIVolume writes the volume's payload, if it changed since the last
// write, the way the kubelet's atomic writer does: the files go to a new
// timestamped directory, the ..data link is swapped to it by a rename, and
// the visible names are links into ..data; a reader sees the old payload
// or the new one, never a mix.
func (m *Manager) writeAPIVolume(ctx context.Context, pod *v1.Pod, v *v1.Volume, rel string) error {
	p, err := m.payload(ctx, pod, v)
	if err != nil {
		return err
	}
	gid := fsGroup(pod)
	d := digest(p, gid)
	dir := filepath.Join(m.PodDir(pod.UID), rel)
	if m.sameAsWritten(pod.UID, dir, d) {
		if _, err := os.Lstat(filepath.Join(dir, "..data")); err == nil {
			return nil
		}
	}
	dfd, err := safefile.MkdirBeneath(m.PodDir(pod.UID), rel, 0o755, -1)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := ownDir(dfd, 0o755, gid); err != nil {
		return err
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	ts := m.now().UTC().Format("..2006_01_02_15_04_05.000000000")
	for _, name := range sortedPaths(p) {
		f := p[name]
		mode := f.mode
		if gid >= 0 {
			mode |= 0o040 // readable by the fsGroup
		}
		if err := safefile.WriteBeneath(dir, filepath.Join(ts, filepath.FromSlash(name)), f.data, mode, 0o755, gid); err != nil {
			return err
		}
	}
	if len(p) == 0 {
		if err := unix.Mkdirat(dfd, ts, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", filepath.Join(dir, ts), err)
		}
	}
	_ = unix.Unlinkat(dfd, "..data_tmp", 0)
	if err := unix.Symlinkat(ts, dfd, "..data_tmp"); err != nil {
		return fmt.Errorf("link %s: %w", filepath.Join(dir, "..data_tmp"), err)
	}
	if err := unix.Renameat(dfd, "..data_tmp", dfd, "..data"); err != nil {
		return fmt.Errorf("swap %s: %w", filepath.Join(dir, "..data"), err)
	}
	// The visible names: a link per top-level name into ..data; names no
	// longer in the payload go.
	top := map[string]bool{}
	for name := range p {
		top[strings.SplitN(name, "/", 2)[0]] = true
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "..") {
			if n != "..data" && n != ts && n != old {
				_ = os.RemoveAll(filepath.Join(dir, n)) // an interrupted write's leftovers
			}
			continue
		}
		if !top[n] {
			_ = unix.Unlinkat(dfd, n, 0)
		}
	}
	for n := range top {
		if target, err := os.Readlink(filepath.Join(dir, n)); err == nil && target == filepath.Join("..data", n) {
			continue
		}
		_ = unix.Unlinkat(dfd, n, 0)
		if err := unix.Symlinkat(filepath.Join("..data", n), dfd, n); err != nil {
			return fmt.Errorf("link %s: %w", filepath.Join(dir, n), err)
		}
	}
	if old != "" && old != ts && strings.HasPrefix(old, "..") && !strings.Contains(old, "/") {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	m.setWritten(pod.UID, dir, d)
	return nil
}

// sameAsWritten reports whether the volume at dir last got the payload of
// digest d, so that an unchanged payload is not written again.
func (m *Manager) sameAsWritten(uid types.UID, dir string, d [32]byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.written[uid][dir] == d
}

// setWritten records the digest of the payload just written at dir.
func (m *Manager) setWritten(uid types.UID, dir string, d [32]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.written[uid] == nil {
		m.written[uid] = map[string][32]byte{}
	}
	m.written[uid][dir] = d
}

func sortedPaths(p map[string]file) []string {
	out := make([]string, 0, len(p))
	for k := range p {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Refresh rewrites the pod's downwardAPI, config map, secret and projected
// volumes whose content changed (a label or a config map edited, a token
// due for renewal). Objects come from the Objects cache, so a refresh with
// nothing due asks the API server nothing.
func (m *Manager) Refresh(ctx context.Context, pod *v1.Pod) error {
	var errs []error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.DownwardAPI != nil {
			rel := filepath.Join("volumes", downwardAPIPlugin, v.Name)
			if err := m.writeDownwardAPI(pod, m.PodDir(pod.UID), rel, v.DownwardAPI); err != nil {
				errs = append(errs, &SetupError{Volume: v.Name, Err: err})
			}
			continue
		}
		plugin, ok := apiVolume(v)
		if !ok {
			continue
		}
		if err := m.writeAPIVolume(ctx, pod, v, filepath.Join("volumes", plugin, v.Name)); err != nil {
			errs = append(errs, &SetupError{Volume: v.Name, Err: err})
		}
	}
	return errors.Join(errs...)
}

// Forget drops what is kept of a pod that is gone (its tokens, the digests
// of its volumes, its claims: a ReadWriteOncePod claim is free again).
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tokens, uid)
	delete(m.written, uid)
	delete(m.claims, uid)
	delete(m.certs, uid)
}
