package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const node = "node-a"

func TestParseFormats(t *testing.T) {
	cases := []struct {
		name  string
		data  string
		names []string
	}{
		{"yaml pod", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: i:1}]\n", []string{"a"}},
		{"json pod", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i:1"}]}}`, []string{"a"}},
		{"several documents", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i}]}\n---\n# comment only\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: c, image: i}]}\n", []string{"a", "b"}},
		{"pod list", "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: i}]}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: b}\n  spec: {containers: [{name: c, image: i}]}\n", []string{"a", "b"}},
		{"explicit empty list", "apiVersion: v1\nkind: List\nitems: []\n", nil},
		{"array of pods", `[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}}]`, []string{"a"}},
		{"yaml array of classic manifests", "- version: v1beta1\n  id: x\n  containers: [{name: c, image: i}]\n- version: v1beta2\n  id: yy\n  containers: [{name: c, image: i}]\n", []string{"x", "yy"}},
		{"empty array", "[]", nil},
		{"classic manifest", "version: v1beta1\nid: old\ncontainers:\n- name: c\n  image: i:1\n  command: [run]\n  cpu: 100\n  memory: 67108864\n", []string{"old"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pods, _, err := Parse([]byte(c.data), node, "file")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
				if p.Namespace != "default" || p.UID == "" || p.Spec.NodeName != node || p.Spec.RestartPolicy != v1.RestartPolicyAlways {
					t.Errorf("pod %s not defaulted: ns %q uid %q node %q policy %q", p.Name, p.Namespace, p.UID, p.Spec.NodeName, p.Spec.RestartPolicy)
				}
			}
			if strings.Join(names, ",") != strings.Join(c.names, ",") {
				t.Errorf("pods %v, want %v", names, c.names)
			}
		})
	}
}

func TestParseErrorsNameDocumentAndField(t *testing.T) {
	cases := []struct {
		name string
		data string
		want []string // substrings of the error
	}{
		{"empty", "", []string{"empty"}},
		{"only comments", "# nothing\n---\n", []string{"empty"}},
		{"unknown field", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: i, imagee: x}]\n", []string{"document 1", `spec.containers[0].imagee`}},
		{"duplicate field", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","name":"b"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, []string{"document 1", `key "name" already set`}},
		{"second document invalid", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: c, image: i, ports: [{containerPort: 0}]}]}\n", []string{"document 2", `pod "b"`, "spec.containers[0].ports[0].containerPort"}},
		{"wrong kind", "apiVersion: apps/v1\nkind: Deployment\n", []string{"unsupported", "Deployment"}},
		{"no kind", "metadata: {name: a}\n", []string{"missing apiVersion and kind"}},
		{"list item unknown field", "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spek: {}\n", []string{"items[0]", "spek"}},
		{"not yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a\n", []string{"document"}},
		{"classic unknown field", "version: v1beta1\nid: x\ncontainers: [{name: c, image: i, cpus: 1}]\n", []string{"cpus"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Parse([]byte(c.data), node, "file")
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, _, err := Parse(nil, node, "file"); !errors.Is(err, ErrEmpty) {
		t.Errorf("Parse(nil) = %v, want ErrEmpty", err)
	}
}

func TestDerivedUIDStable(t *testing.T) {
	a := DerivedUID("n", "file", "default", "web")
	if a != DerivedUID("n", "file", "default", "web") {
		t.Fatal("derived UID not stable")
	}
	for _, other := range []string{
		string(DerivedUID("m", "file", "default", "web")),
		string(DerivedUID("n", "http", "default", "web")),
		string(DerivedUID("n", "file", "other", "web")),
		string(DerivedUID("n", "file", "default", "web2")),
	} {
		if other == string(a) {
			t.Errorf("derived UID collides: %s", other)
		}
	}
	if !uidPattern.MatchString(string(a)) {
		t.Errorf("derived UID %s does not match %s", a, uidPattern)
	}
}

func TestClassicConversion(t *testing.T) {
	data := `version: v1beta2
id: web
uuid: 0a1b2c3d
restartPolicy: {onFailure: {}}
volumes:
- name: data
  source: {hostDir: {path: /srv}}
- name: tmp
  source: {emptyDir: {}}
containers:
- name: server
  image: srv:1
  command: [serve, --port=80]
  workingDir: /w
  cpu: 250
  memory: 33554432
  ports: [{containerPort: 80, hostPort: 8080}]
  env: [{name: A, value: b}]
  volumeMounts: [{name: data, mountPath: /data, readOnly: true}]
  livenessProbe:
    type: http
    enabled: true
    httpGet: {path: /healthz, port: "80"}
    initialDelaySeconds: 5
`
	pods, err := decodeClassic(mustJSON(t, data))
	if err != nil {
		t.Fatal(err)
	}
	p := pods[0]
	c := p.Spec.Containers[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"name", p.Name, "web"},
		{"uid", string(p.UID), "0a1b2c3d"},
		{"restartPolicy", p.Spec.RestartPolicy, v1.RestartPolicyOnFailure},
		{"hostDir", p.Spec.Volumes[0].HostPath.Path, "/srv"},
		{"emptyDir", p.Spec.Volumes[1].EmptyDir != nil, true},
		{"command becomes args", strings.Join(c.Args, " "), "serve --port=80"},
		{"no command", len(c.Command), 0},
		{"cpu request", c.Resources.Requests.Cpu().MilliValue(), int64(250)},
		{"no cpu limit", c.Resources.Limits.Cpu().IsZero(), true},
		{"memory limit", c.Resources.Limits.Memory().Value(), int64(32 << 20)},
		{"port", c.Ports[0].HostPort, int32(8080)},
		{"mount", c.VolumeMounts[0].ReadOnly, true},
		{"probe path", c.LivenessProbe.HTTPGet.Path, "/healthz"},
		{"probe delay", c.LivenessProbe.InitialDelaySeconds, int32(5)},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
}

func mustJSON(t *testing.T, y string) []byte {
	t.Helper()
	docs, err := splitDocuments([]byte(y))
	if err != nil || len(docs) != 1 {
		t.Fatalf("split: %v (%d docs)", err, len(docs))
	}
	return docs[0]
}

func TestStructureCount(t *testing.T) {
	cases := []struct {
		name string
		data string
		want int
	}{
		{"empty", "", 0},
		{"block mapping", "a: 1\nb:\n  c: x\n", 3},
		{"block sequence", "- a\n-\tb\n-\n-", 4},
		{"dashes in words are not entries", "name: my-pod\nimage: -x\n", 2},
		{"document markers", "a: 1\n---\nb: 2\n--- c\n", 4},
		{"flow collections", `{"a":[1,2,3],"b":{}}`, 8},
		{"explicit key", "? a\n: b\n?x\n", 2},
		{"inside strings and comments too", "a: 'x: y, z' # q: r\n", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := structureCount([]byte(c.data)); got != c.want {
				t.Errorf("structureCount(%q) = %d, want %d", c.data, got, c.want)
			}
		})
	}
}

// A manifest over MaxStructure is refused before it is decoded; one at it
// is decoded and judged on its content (here: too many annotations).
func TestParseBoundsStructure(t *testing.T) {
	pod := func(annotations int) string {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  annotations:\n")
		for i := range annotations {
			fmt.Fprintf(&b, "    k%d: v\n", i)
		}
		b.WriteString("spec: {containers: [{name: c, image: i}]}\n")
		return b.String()
	}
	header := structureCount([]byte(pod(0)))
	if _, _, err := Parse([]byte(pod(MaxStructure-header)), node, "file"); errors.Is(err, ErrTooComplex) || !strings.Contains(fmt.Sprint(err), "metadata.annotations: Too long") {
		t.Errorf("manifest at the bound: %v, want it decoded and its annotations refused", err)
	}
	_, _, err := Parse([]byte(pod(MaxStructure-header+1)), node, "file")
	if !errors.Is(err, ErrTooComplex) || !strings.Contains(err.Error(), fmt.Sprintf("%d indicators of YAML/JSON structure, more than %d", MaxStructure+1, MaxStructure)) {
		t.Errorf("manifest over the bound: %v, want ErrTooComplex", err)
	}
	if _, _, err := Parse([]byte(strings.Repeat("[", MaxStructure+1)), node, "file"); !errors.Is(err, ErrTooComplex) {
		t.Errorf("deep flow nesting: %v, want ErrTooComplex", err)
	}
}
