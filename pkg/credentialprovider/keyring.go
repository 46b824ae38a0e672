// Package credentialprovider holds registry credentials (those of the
// node's Docker config files, and those of a pod's image pull secrets) and
// says which of them a pull of an image may try, matching registries as
// the kubelet's credential provider does.
package credentialprovider

import (
	"net"
	"path"
	"regexp"
	"sort"
	"strings"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// dockerHub is the key of Docker Hub credentials, as Docker writes them;
// docker.io and registry-1.docker.io name the same registry.
const dockerHub = "index.docker.io"

// Keyring holds registry credentials by the registry they are for:
// host[:port][/path], where each dot-separated part of the host may be a
// glob ("*.example.com"). The zero Keyring and a nil one hold none. Add
// may not run concurrently with anything; once filled, a Keyring is only
// read, from any goroutine.
type Keyring struct {
	keys  []string // of creds, in reverse order: a key with a path before its bare host
	creds map[string][]kubecontainer.Auth
}

// add adds the credentials of one Docker config.
func (k *Keyring) add(cfg dockerConfig) {
	if k.creds == nil {
		k.creds = map[string][]kubecontainer.Auth{}
	}
	// In the config's order of keys: two keys that normalize to one
	// registry ("host" and "http://host/v2/") are tried in a stable order.
	locs := make([]string, 0, len(cfg))
	for loc := range cfg {
		locs = append(locs, loc)
	}
	sort.Strings(locs)
	for _, loc := range locs {
		key := registryKey(loc)
		if _, ok := k.creds[key]; !ok {
			k.keys = append(k.keys, key)
		}
		e := cfg[loc]
		k.creds[key] = append(k.creds[key], kubecontainer.Auth{Username: e.Username, Password: e.Password, ServerAddress: loc})
	}
	// Reverse order puts "quay.io/team" before "quay.io", and a literal
	// part before a glob ("*" sorts before letters and digits).
	sort.Sort(sort.Reverse(sort.StringSlice(k.keys)))
}

// Len is how many credentials the keyring holds.
func (k *Keyring) Len() int {
	if k == nil {
		return 0
	}
	n := 0
	for _, c := range k.creds {
		n += len(c)
	}
	return n
}

// Lookup returns the credentials a pull of image may try, in the order to
// try them: those of every key that matches, most specific key first. A
// key matches when its host has as many parts as the image's registry,
// each part matching (a glob matches one part), its port is the image's,
// and its path is a prefix of the image's repository.
func (k *Keyring) Lookup(image string) []kubecontainer.Auth {
	if k == nil {
		return nil
	}
	host, repo := splitImage(image)
	var out []kubecontainer.Auth
	for _, key := range k.keys {
		if keyMatches(key, host, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	return out
}

// keyMatches tells whether a registry key covers an image on host whose
// repository (without tag) is repo.
func keyMatches(key, host, repo string) bool {
	keyHost, keyPath, _ := strings.Cut(key, "/")
	globs, globPort := splitHost(keyHost)
	parts, port := splitHost(host)
	if globPort != port || len(globs) != len(parts) {
		return false
	}
	for i, g := range globs {
		if ok, err := path.Match(g, parts[i]); err != nil || !ok {
			return false
		}
	}
	// As the kubelet: a plain prefix, so "reg/team" covers "reg/teams/x"
	// too (both on one registry, which sees the credential either way).
	return strings.HasPrefix(repo, keyPath)
}

// splitHost splits host[:port] into the host's dot-separated parts and
// the port ("" when none).
func splitHost(hostPort string) (parts []string, port string) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		host, port = hostPort, ""
	}
	return strings.Split(strings.ToLower(host), "."), port
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// registryKey turns a Docker config key ("https://index.docker.io/v1/",
// "registry.local:5000/team", "http://127.0.0.1:5000/v2/") into
// host[:port][/path]: without scheme, API version or trailing slash, with
// Docker Hub's names as one.
func registryKey(loc string) string {
	loc = schemeRE.ReplaceAllString(loc, "")
	host, p, _ := strings.Cut(loc, "/")
	p = strings.Trim(p, "/")
	for _, v := range []string{"v1", "v2"} {
		if p == v {
			p = ""
		} else if rest, ok := strings.CutPrefix(p, v+"/"); ok {
			p = rest
		}
	}
	if isDockerHub(host) {
		host = dockerHub
	}
	if p == "" {
		return host
	}
	return host + "/" + p
}

func isDockerHub(host string) bool {
	return host == dockerHub || host == "docker.io" || host == "registry-1.docker.io"
}

// splitImage splits an image reference into its registry and its
// repository, as Docker reads it: the first component is a registry only
// if it has a dot or a port or is localhost; otherwise, or if it is one of
// Docker Hub's names, the registry is Docker Hub, whose single-component
// repositories are under library/.
func splitImage(image string) (host, repo string) {
	first, rest, ok := strings.Cut(image, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") && !isDockerHub(first) {
		host, repo = first, rest
	} else {
		host, repo = dockerHub, image
		if ok && isDockerHub(first) {
			repo = rest
		}
		if !strings.Contains(repo, "/") {
			repo = "library/" + repo
		}
	}
	// The tag or digest is no part of the repository.
	if i := strings.IndexByte(repo, '@'); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return host, repo
}

// RegistryHost is the registry an image reference names (Docker Hub's
// index.docker.io when it names none).
func RegistryHost(image string) string {
	host, _ := splitImage(image)
	return host
}
