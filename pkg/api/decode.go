// Package api turns manifests into validated Kubernetes v1 Pods: it decodes the
// accepted formats, applies the defaults the agent relies on, validates what the
// agent implements, and gives each pod its identity (UID and full name).
package api

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ErrEmpty is returned for a manifest that holds no document at all. Only an
// explicit empty list means "zero pods"; an empty file is far more often a
// half-written one.
var ErrEmpty = errors.New("api: manifest is empty")

// MaxStructure bounds the YAML/JSON structure of one manifest, counted by
// structureCount. Decoding costs memory by the node, not by the byte (some
// 600 bytes a mapping entry between the YAML parser's tree, the generic
// maps it becomes, the JSON and the typed pod): 9.99 MiB of one-line keys
// peaked at 460 MiB. This many (a List of 10,000 small pods counts
// 190,000) bounds that to about 180 MiB.
const MaxStructure = 1 << 18

// ErrTooComplex is returned for a manifest over MaxStructure, before any
// of it is decoded.
var ErrTooComplex = errors.New("api: manifest too complex to decode")

// structureCount is an upper bound, found without parsing, of the number
// of collection entries written in data (aliases aside: the YAML library
// bounds their expansion itself): every mapping entry needs a ':', every
// flow entry a ',' or its opening '[' or '{', every block sequence entry
// (and document marker) a '-' followed by a blank, every explicit key a
// '?' followed by a blank. Each is counted wherever it appears, inside
// strings and comments too: a count that skipped what looks like a
// string would have to parse YAML to be sure, and a wrong guess would let
// structure through uncounted.
func structureCount(data []byte) int {
	n := 0
	for i, c := range data {
		switch c {
		case ':', ',', '[', '{':
			n++
		case '-', '?':
			if i+1 == len(data) {
				n++
				break
			}
			switch data[i+1] {
			case ' ', '\t', '\n', '\r':
				n++
			}
		}
	}
	return n
}

// DocumentError names the document (1-based, in file order) that failed.
type DocumentError struct {
	Index int
	Err   error
}

// Error is one line, even for the YAML parser's multi-line messages.
func (e *DocumentError) Error() string {
	return fmt.Sprintf("document %d: %s", e.Index, strings.Join(strings.Fields(e.Err.Error()), " "))
}
func (e *DocumentError) Unwrap() error { return e.Err }

// typeHeader is what every accepted document carries to say what it is.
type typeHeader struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// Parse decodes a manifest (YAML or JSON; one or more documents, each a v1 Pod,
// a PodList/List, a 2014 ContainerManifest, or an array of Pods or manifests),
// sets each pod's defaults for this node and source kind, and validates it. A manifest is all or nothing: any error rejects it
// whole, so its source can keep what it last produced. ignored lists written
// fields the agent accepts without acting on them.
func Parse(data []byte, node, source string) (pods []*v1.Pod, ignored []string, err error) {
	if n := structureCount(data); n > MaxStructure {
		return nil, nil, fmt.Errorf("%w: %d indicators of YAML/JSON structure, more than %d", ErrTooComplex, n, MaxStructure)
	}
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, nil, err
	}
	if len(docs) == 0 {
		return nil, nil, ErrEmpty
	}
	for i, doc := range docs {
		got, err := decodeDocument(doc)
		if err != nil {
			return nil, nil, &DocumentError{Index: i + 1, Err: err}
		}
		for _, pod := range got {
			SetDefaults(pod, node, source)
			errs, ign := Validate(pod)
			if len(errs) > 0 {
				return nil, nil, &DocumentError{Index: i + 1, Err: fmt.Errorf("pod %q: %w", pod.Name, errs.ToAggregate())}
			}
			pod.Spec.NodeName = node
			for _, f := range ign {
				ignored = append(ignored, fmt.Sprintf("pod %q: %s", pod.Name, f))
			}
		}
		pods = append(pods, got...)
	}
	return pods, ignored, nil
}

// splitDocuments returns the non-empty YAML documents of data, each as JSON.
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, &DocumentError{Index: i, Err: err}
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			i--
			continue
		}
		docs = append(docs, js)
	}
}

func decodeDocument(js []byte) ([]*v1.Pod, error) {
	if t := bytes.TrimSpace(js); len(t) > 0 && t[0] == '[' {
		return decodeArray(t)
	}
	var h typeHeader
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &h); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	switch {
	case h.Kind == "Pod" && h.APIVersion == "v1":
		pod := &v1.Pod{}
		if err := strictUnmarshal(js, pod, ""); err != nil {
			return nil, err
		}
		return []*v1.Pod{pod}, nil
	case (h.Kind == "PodList" || h.Kind == "List") && h.APIVersion == "v1":
		return decodeList(js)
	case isClassic(js):
		return decodeClassic(js)
	case h.Kind == "" && h.APIVersion == "":
		return nil, errors.New("missing apiVersion and kind (want apiVersion: v1, kind: Pod)")
	default:
		return nil, fmt.Errorf("unsupported apiVersion %q kind %q (want v1 Pod, PodList or List)", h.APIVersion, h.Kind)
	}
}

// decodeArray decodes a bare array of Pods or of 2014 ContainerManifests,
// the form the classic agent read from etcd.
func decodeArray(js []byte) ([]*v1.Pod, error) {
	var items []jsonRaw
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &items); err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, 0, len(items))
	for i, item := range items {
		if t := bytes.TrimSpace(item); len(t) > 0 && t[0] == '[' {
			return nil, fmt.Errorf("[%d]: nested array", i)
		}
		got, err := decodeDocument(item)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		pods = append(pods, got...)
	}
	return pods, nil
}

// rawList is a PodList or List whose items are decoded one by one, so an error
// names the item.
type rawList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		ResourceVersion string `json:"resourceVersion,omitempty"`
	} `json:"metadata"`
	Items []jsonRaw `json:"items"`
}

type jsonRaw []byte

func (r *jsonRaw) UnmarshalJSON(b []byte) error { *r = append((*r)[:0], b...); return nil }

func decodeList(js []byte) ([]*v1.Pod, error) {
	var l rawList
	if err := strictUnmarshal(js, &l, ""); err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, 0, len(l.Items))
	for i, item := range l.Items {
		prefix := fmt.Sprintf("items[%d]", i)
		var h typeHeader
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(item, &h); err != nil {
			return nil, fmt.Errorf("%s: %w", prefix, err)
		}
		// Items of a PodList conventionally omit their own type.
		if (h.Kind != "" && h.Kind != "Pod") || (h.APIVersion != "" && h.APIVersion != "v1") {
			return nil, fmt.Errorf("%s: unsupported apiVersion %q kind %q (want v1 Pod)", prefix, h.APIVersion, h.Kind)
		}
		pod := &v1.Pod{}
		if err := strictUnmarshal(item, pod, prefix); err != nil {
			return nil, err
		}
		pod.APIVersion, pod.Kind = "v1", "Pod"
		pods = append(pods, pod)
	}
	return pods, nil
}

// strictUnmarshal decodes js into v and fails on unknown or duplicate fields,
// naming each by its path (prefixed with prefix).
func strictUnmarshal(js []byte, v any, prefix string) error {
	strictErrs, err := sigsjson.UnmarshalStrict(js, v)
	if err != nil {
		return withPrefix(prefix, err)
	}
	if len(strictErrs) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(strictErrs))
	for _, e := range strictErrs {
		msgs = append(msgs, withPrefix(prefix, e).Error())
	}
	return errors.New(strings.Join(msgs, "; "))
}

func withPrefix(prefix string, err error) error {
	if prefix == "" {
		return err
	}
	var fe sigsjson.FieldError
	if errors.As(err, &fe) {
		return fmt.Errorf("%s: %s", prefix, strings.TrimPrefix(err.Error(), "json: "))
	}
	return fmt.Errorf("%s: %w", prefix, err)
}
