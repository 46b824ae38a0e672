package kuberuntime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// expand replaces $(VAR) in s as Kubernetes does: a defined variable is
// replaced by its value, an undefined reference is left as written, and $$
// escapes a $.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// objectReadTimeout bounds a read of a config map or secret for a
// container's environment.
const objectReadTimeout = 10 * time.Second

// containerEnv resolves a container's environment in order: each value may
// refer to the variables before it with $(VAR).
//
// The Services' variables (node mode) come first, so the container's own
// may refer to them; one the container defines itself is its own.
// hostPaths are the pod's volumes on the host, by name (fileKeyRef).
func (m *Manager) containerEnv(ctx context.Context, pod *v1.Pod, c *v1.Container, podIP string, hostPaths map[string]string) ([]string, map[string]string, error) {
	vars := map[string]string{}
	svc, err := m.serviceEnv(pod)
	if err != nil {
		return nil, nil, err
	}
	own := map[string]bool{}
	for _, e := range c.Env {
		own[e.Name] = true
	}
	from, err := m.envFrom(ctx, pod, c)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range from {
		own[e.Name] = true
	}
	env := make([]string, 0, len(c.Env)+len(svc)+len(from))
	for _, e := range svc {
		vars[e.Name] = e.Value
		if !own[e.Name] {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	// envFrom before env: a variable env names again is env's.
	for _, e := range from {
		vars[e.Name] = e.Value
		if !ownEnv(c, e.Name) {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	for _, e := range c.Env {
		var v string
		var err error
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, func(n string) (string, bool) { x, ok := vars[n]; return x, ok })
		case e.ValueFrom.FieldRef != nil:
			v, err = m.downward.field(pod, e.ValueFrom.FieldRef.FieldPath, podIP)
		case e.ValueFrom.ResourceFieldRef != nil:
			v, err = m.downward.resource(pod, e.ValueFrom.ResourceFieldRef, c.Name)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			var ok bool
			if v, ok, err = m.objectKey(ctx, pod.Namespace, "configmap", ref.Name, ref.Key, ref.Optional); err == nil && !ok {
				continue // optional and absent: no variable
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			var ok bool
			if v, ok, err = m.objectKey(ctx, pod.Namespace, "secret", ref.Name, ref.Key, ref.Optional); err == nil && !ok {
				continue
			}
		case e.ValueFrom.FileKeyRef != nil:
			var ok bool
			if v, ok, err = fileKey(pod, e.ValueFrom.FileKeyRef, hostPaths); err == nil && !ok {
				continue
			}
		}
		if err != nil && e.ValueFrom.FileKeyRef != nil {
			// The kubelet's message as it is: it names the key and file.
			return nil, nil, err
		}
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	return env, vars, nil
}

func ownEnv(c *v1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// objectData reads a config map's or secret's data (node mode); found is
// false for an optional one that is absent. The read is not cancelled with
// ctx, the pod's sync, which a termination request cancels (the container
// would be shown waiting on a cancelled read); its timeout bounds it.
func (m *Manager) objectData(ctx context.Context, namespace, kind, name string, optional *bool) (data map[string]string, found bool, err error) {
	opt := optional != nil && *optional
	if m.cfg.Objects == nil {
		return nil, false, fmt.Errorf("%w to read %s %s/%s", volumes.ErrNoAPIServer, kind, namespace, name)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), objectReadTimeout)
	defer cancel()
	data = map[string]string{}
	switch kind {
	case "configmap":
		cm, err := m.cfg.Objects.ConfigMap(ctx, namespace, name)
		if apierrors.IsNotFound(err) && opt {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("config map %s/%s: %w", namespace, name, err)
		}
		maps.Copy(data, cm.Data)
	default:
		s, err := m.cfg.Objects.Secret(ctx, namespace, name)
		if apierrors.IsNotFound(err) && opt {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
		}
		for key, v := range s.Data {
			data[key] = string(v)
		}
	}
	return data, true, nil
}

// objectKey is one key of a config map or secret, for configMapKeyRef and
// secretKeyRef: a missing key is an error unless the reference is
// optional, as the kubelet's.
func (m *Manager) objectKey(ctx context.Context, namespace, kind, name, key string, optional *bool) (string, bool, error) {
	data, found, err := m.objectData(ctx, namespace, kind, name, optional)
	if err != nil || !found {
		return "", false, err
	}
	v, ok := data[key]
	if !ok {
		if optional != nil && *optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in %s %s/%s", key, map[string]string{"configmap": "ConfigMap", "secret": "Secret"}[kind], namespace, name)
	}
	return v, true, nil
}

// envFrom is the container's envFrom variables, in order (a later source
// wins a name), each key with the source's prefix. Any printable ASCII name
// is kept, as the kubelet keeps them since relaxed variable names went GA
// (a prefix may start with a digit or hold '$'); only a name Docker could
// not pass (one with '=', a control or non-ASCII character) is left out.
func (m *Manager) envFrom(ctx context.Context, pod *v1.Pod, c *v1.Container) ([]v1.EnvVar, error) {
	var out []v1.EnvVar
	index := map[string]int{}
	for _, src := range c.EnvFrom {
		var data map[string]string
		var found bool
		var err error
		switch {
		case src.ConfigMapRef != nil:
			data, found, err = m.objectData(ctx, pod.Namespace, "configmap", src.ConfigMapRef.Name, src.ConfigMapRef.Optional)
		case src.SecretRef != nil:
			data, found, err = m.objectData(ctx, pod.Namespace, "secret", src.SecretRef.Name, src.SecretRef.Optional)
		}
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		keys := slices.Sorted(maps.Keys(data))
		for _, key := range keys {
			name := src.Prefix + key
			if len(validation.IsRelaxedEnvVarName(name)) > 0 {
				continue
			}
			if i, ok := index[name]; ok {
				out[i].Value = data[key]
				continue
			}
			index[name] = len(out)
			out = append(out, v1.EnvVar{Name: name, Value: data[key]})
		}
	}
	return out, nil
}
