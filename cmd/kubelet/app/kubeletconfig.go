package app

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kubeletConfigKind and kubeletConfigAPIVersion name the kubelet's
// configuration file, as kubeadm writes it to /var/lib/kubelet/config.yaml.
const (
	kubeletConfigKind       = "KubeletConfiguration"
	kubeletConfigAPIVersion = "kubelet.config.k8s.io/v1beta1"
	// dropInExt is the extension of the --config-dir files read, as the
	// kubelet's; other files are skipped.
	dropInExt = ".conf"
)

// kubeletConfig is a KubeletConfiguration read as the kubelet reads it: the
// --config file, then the --config-dir drop-ins merged over it.
type kubeletConfig struct {
	kc kubeletv1beta1.KubeletConfiguration
	// set holds the fields the files set, as dotted JSON paths
	// ("authentication.x509.clientCAFile"). A field the kubelet reads as
	// "take the default" when zero (syncFrequency: 0s, port: 0) counts as
	// unset; a pointer field counts whenever it is given (healthzPort: 0).
	set map[string]bool
	// sources names the files read, for messages.
	sources string
}

// isKubeletConfigFile reports whether path is a regular file whose kind is
// KubeletConfiguration: --config then names the kubelet's configuration,
// not (its 2014 meaning) the pod manifests.
func isKubeletConfigFile(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var h struct {
		Kind string `json:"kind"`
	}
	return yaml.Unmarshal(data, &h) == nil && h.Kind == kubeletConfigKind
}

// loadKubeletConfig reads file (if any), then the drop-ins of dir (if any)
// in lexical order of their paths, each merged over what came before as a
// JSON merge patch, as the kubelet merges them. Every file must be a
// kubelet.config.k8s.io/v1beta1 KubeletConfiguration without unknown or
// duplicate fields. Relative paths in the file are taken from its directory.
func loadKubeletConfig(file, dir string) (*kubeletConfig, error) {
	merged := map[string]any{}
	var sources []string
	if file != "" {
		obj, err := readKubeletConfigFile(file)
		if err != nil {
			return nil, err
		}
		resolveRelativePaths(obj, filepath.Dir(file))
		merged, sources = obj, append(sources, file)
	}
	if dir != "" {
		dropIns, err := dropInFiles(dir)
		if err != nil {
			return nil, err
		}
		for _, p := range dropIns {
			obj, err := readKubeletConfigFile(p)
			if err != nil {
				return nil, err
			}
			merged, sources = mergePatch(merged, obj), append(sources, p)
		}
	}
	data, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("KubeletConfiguration: %w", err)
	}
	c := &kubeletConfig{set: map[string]bool{}, sources: strings.Join(sources, ", ")}
	if err := json.Unmarshal(data, &c.kc); err != nil {
		return nil, fmt.Errorf("KubeletConfiguration %s: %w", c.sources, err)
	}
	setFields(merged, reflect.TypeOf(c.kc), "", c.set)
	return c, nil
}

// readKubeletConfigFile decodes one file strictly, as an object of JSON
// values: its kind and apiVersion must be the kubelet's, and each field one
// of KubeletConfiguration's.
func readKubeletConfigFile(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("KubeletConfiguration: %w", err)
	}
	if strings.TrimSpace(string(data)) == "" {
		return nil, fmt.Errorf("KubeletConfiguration %s: the file is empty", path)
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("KubeletConfiguration %s: %w", path, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(js, &obj); err != nil {
		return nil, fmt.Errorf("KubeletConfiguration %s: want an object: %w", path, err)
	}
	kind, apiVersion := obj["kind"], obj["apiVersion"]
	if kind != kubeletConfigKind || apiVersion != kubeletConfigAPIVersion {
		return nil, fmt.Errorf("KubeletConfiguration %s: kind %v, apiVersion %v: want kind %s, apiVersion %s",
			path, kind, apiVersion, kubeletConfigKind, kubeletConfigAPIVersion)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	strict, err := sigsjson.UnmarshalStrict(js, &kc)
	if err != nil {
		return nil, fmt.Errorf("KubeletConfiguration %s: %w", path, err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("KubeletConfiguration %s: %s", path, strings.Join(msgs, "; "))
	}
	return obj, nil
}

// dropInFiles lists the *.conf files under dir, subdirectories included, in
// lexical order of their paths (the order of filepath.WalkDir, the
// kubelet's).
func dropInFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && filepath.Ext(d.Name()) == dropInExt {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--config-dir: %w", err)
	}
	return out, nil
}

// mergePatch applies patch to base as a JSON merge patch (RFC 7386): an
// object merges key by key, null removes, anything else replaces.
func mergePatch(base, patch map[string]any) map[string]any {
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(base, k)
		case map[string]any:
			bv, _ := base[k].(map[string]any)
			if bv == nil {
				bv = map[string]any{}
			}
			base[k] = mergePatch(bv, pv)
		default:
			base[k] = v
		}
	}
	return base
}

// kubeletConfigPaths are the fields holding file paths, which the kubelet
// takes relative to the configuration file's directory.
var kubeletConfigPaths = [][]string{{"staticPodPath"}, {"tlsCertFile"}, {"tlsPrivateKeyFile"},
	{"authentication", "x509", "clientCAFile"}, {"resolvConf"}}

// resolveRelativePaths makes obj's relative paths absolute under root.
func resolveRelativePaths(obj map[string]any, root string) {
	for _, path := range kubeletConfigPaths {
		m := obj
		for _, k := range path[:len(path)-1] {
			if m, _ = m[k].(map[string]any); m == nil {
				break
			}
		}
		last := path[len(path)-1]
		if s, ok := m[last].(string); ok && s != "" && !filepath.IsAbs(s) {
			m[last] = filepath.Join(root, s)
		}
	}
}

// setFields records in set the paths of obj's fields that ask for a value:
// zero values of non-pointer fields are the kubelet's "use the default"
// (and what kubeadm writes for fields it leaves alone: "0s", {}), so they
// are left out.
func setFields(obj map[string]any, t reflect.Type, prefix string, set map[string]bool) {
	for key, v := range obj {
		if prefix == "" && (key == "kind" || key == "apiVersion") {
			continue
		}
		f, ok := jsonField(t, key)
		if !ok {
			continue
		}
		path := prefix + key
		if v == nil {
			continue // null: not given
		}
		if f.Kind() == reflect.Pointer {
			set[path] = true
			continue
		}
		if sub, isObj := v.(map[string]any); isObj && f.Kind() == reflect.Struct {
			setFields(sub, f, path+".", set)
			continue
		}
		if !zeroJSON(v) {
			set[path] = true
		}
	}
}

// jsonField is the type of t's field whose JSON name is key, looking into
// embedded structs.
func jsonField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if sf.Anonymous && name == "" {
			if ft, ok := jsonField(sf.Type, key); ok {
				return ft, true
			}
			continue
		}
		if name == key {
			return sf.Type, true
		}
	}
	return nil, false
}

// zeroJSON reports whether v is a zero value as JSON spells it, or a
// zero duration or quantity ("0s", "0").
func zeroJSON(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == "" || x == "0s" || x == "0"
	case bool:
		return !x
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		for _, e := range x {
			if !zeroJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}

// sortedSet returns the keys of set in order.
func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// applyKubeletConfig sets, from c, every flag the command line (or
// --kubelet-config) did not set: a field the files set, else the kubelet's
// default where it differs from the agent's, so that the file means what it
// means to the kubelet. A field the agent does not implement is returned as
// a warning; a value it cannot honour is an error.
func applyKubeletConfig(fs *pflag.FlagSet, o *Options, c *kubeletConfig) ([]string, error) {
	known := map[string]bool{}
	for _, m := range kubeletConfigFields {
		known[m.path] = true
		if fs.Changed(m.flag) {
			continue // the command line wins
		}
		values := m.kubeletDefault
		if c.set[m.path] {
			values = m.value(&c.kc)
		}
		// A slice flag's first Set replaces its default, the next ones add.
		for _, v := range values {
			if err := fs.Set(m.flag, v); err != nil {
				return nil, fmt.Errorf("KubeletConfiguration %s: %s: %w", c.sources, m.path, err)
			}
		}
	}
	if err := applySpecialFields(o, c); err != nil {
		return nil, err
	}
	var warnings []string
	for _, path := range sortedSet(c.set) {
		if !known[path] && !honouredElsewhere[path] {
			warnings = append(warnings, fmt.Sprintf("KubeletConfiguration %s: %s is not implemented by this agent; ignored", c.sources, path))
		}
	}
	return warnings, nil
}
