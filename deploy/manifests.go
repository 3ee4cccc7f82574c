// Package deploy holds the kustomize base of emptyDir guard (the YAML files in this
// directory, see docs/deploy.md; its workload manifests are rendered from the Helm chart in
// helm/ by test/helm) and decodes it into typed Kubernetes objects, so tests can check and
// apply exactly what users install, without a kustomize binary.
package deploy

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Namespace is where the base installs everything namespaced.
const Namespace = "emptydir-guard"

// WebhookSecretExample is the example Secret for the remediator's webhook token; it is not
// part of the kustomization.
const WebhookSecretExample = "remediator-webhook-secret.example.yaml" //nolint:gosec // G101: a file name, not a credential

// Files are the manifests: the base, its components and the examples.
//
//go:embed *.yaml components
var Files embed.FS

// strict rejects unknown and duplicate fields, as `kubectl apply --validate=strict` would.
var strict = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// Kustomization is the part of a kustomization.yaml (or Component) the tests read.
type Kustomization struct {
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Components []string `json:"components"`
	Patches    []struct {
		Patch  string `json:"patch"`
		Target struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target"`
	} `json:"patches"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// ReadKustomization reads dir/kustomization.yaml from Files ("." is the base).
func ReadKustomization(dir string) (*Kustomization, error) {
	b, err := Files.ReadFile(joinPath(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k Kustomization
	if err := yaml.Unmarshal(b, &k); err != nil { // the struct covers only what the tests read
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	return &k, nil
}

// BaseObjects decodes the resources the base kustomization lists, in order, as typed
// objects of client-go's scheme. Every manifest names its namespace itself, so the
// objects are what kustomize renders (TestKustomizeBuild compares them with krusty's). Not
// krusty here: this package would go from 348 to 491 packages, for every test importing it.
func BaseObjects() ([]runtime.Object, error) {
	k, err := ReadKustomization(".")
	if err != nil {
		return nil, err
	}
	var all []runtime.Object
	for _, r := range k.Resources {
		objs, err := DecodeFile(r)
		if err != nil {
			return nil, err
		}
		all = append(all, objs...)
	}
	return all, nil
}

// DecodeFile decodes one file of Files.
func DecodeFile(name string) ([]runtime.Object, error) {
	b, err := Files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return objs, nil
}

// Decode splits a multi-document YAML stream and decodes every document strictly into a
// typed object of client-go's scheme. Kinds outside the scheme (PodMonitor,
// PrometheusRule) come back as *unstructured.Unstructured. Empty documents are skipped.
func Decode(data []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []runtime.Object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "" {
			continue
		}
		obj, gvk, err := strict.Decode(js, nil, nil)
		if err != nil {
			if !runtime.IsNotRegisteredError(err) {
				return nil, fmt.Errorf("document %d: %w", i, err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				return nil, fmt.Errorf("document %d: %w", i, err)
			}
			out = append(out, u)
			continue
		}
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
		out = append(out, obj)
	}
}

func joinPath(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return strings.TrimSuffix(dir, "/") + "/" + name
}

// Find is the object of type T named name among objs; false when there is none.
func Find[T runtime.Object](objs []runtime.Object, name string) (T, bool) {
	for _, o := range objs {
		if v, ok := o.(T); ok {
			if acc, ok := o.(metav1.Object); ok && acc.GetName() == name {
				return v, true
			}
		}
	}
	var zero T
	return zero, false
}
