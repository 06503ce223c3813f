// Package kubernetes holds the Kubernetes manifests (kustomize base and
// overlays) and this test, which decodes every manifest strictly into its
// typed API object so a misspelled or misplaced field fails here, not at
// kubectl apply.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// typed makes the typed object for an apiVersion and kind.
var typed = map[string]func() any{
	"v1/ConfigMap":                             func() any { return &corev1.ConfigMap{} },
	"v1/Namespace":                             func() any { return &corev1.Namespace{} },
	"v1/Service":                               func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                        func() any { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":                       func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                      func() any { return &appsv1.StatefulSet{} },
	"policy/v1/PodDisruptionBudget":            func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":       func() any { return &networkingv1.NetworkPolicy{} },
	"rbac.authorization.k8s.io/v1/Role":        func() any { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1/RoleBinding": func() any { return &rbacv1.RoleBinding{} },
	"monitoring.coreos.com/v1/ServiceMonitor":  func() any { return &monitoringv1.ServiceMonitor{} },
}

// kustomization is the part of kustomize's Kustomization these manifests
// use; anything else in a kustomization.yaml fails the strict decode.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels,omitempty"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images,omitempty"`
	Patches []struct {
		Path   string `json:"path,omitempty"`
		Patch  string `json:"patch,omitempty"`
		Target *struct {
			Kind string `json:"kind"`
			Name string `json:"name,omitempty"`
		} `json:"target,omitempty"`
	} `json:"patches,omitempty"`
}

// object is one decoded manifest document.
type object struct {
	file, key string
	raw       []byte // JSON
	obj       any
}

func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) != "" {
			out = append(out, []byte(doc))
		}
	}
	return out
}

// decode reads one document strictly into its typed object.
func decode(t *testing.T, file string, doc []byte) object {
	t.Helper()
	var head struct{ APIVersion, Kind string }
	if err := yaml.Unmarshal(doc, &head); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	key := head.APIVersion + "/" + head.Kind
	mk, ok := typed[key]
	if !ok {
		t.Fatalf("%s: no typed object for %s; add it to the test's table", file, key)
	}
	obj := mk()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s: %s: %v", file, key, err)
	}
	raw, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	return object{file: file, key: key, raw: raw, obj: obj}
}

// tree decodes every manifest of the kustomization in dir (recursively
// through its bases) and checks its patches decode as what they patch.
func tree(t *testing.T, dir string) []object {
	t.Helper()
	var k kustomization
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("%s/kustomization.yaml: %s %s", dir, k.APIVersion, k.Kind)
	}
	var objs []object
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			objs = append(objs, tree(t, p)...)
			continue
		}
		for _, doc := range documents(t, p) {
			objs = append(objs, decode(t, p, doc))
		}
	}
	for _, p := range k.Patches {
		objs = applyPatch(t, dir, p.Path, p.Patch, p.Target, objs)
	}
	return objs
}

// applyPatch checks a patch: a strategic-merge file decodes strictly as
// its kind; a JSON 6902 patch applies to its target and the result still
// decodes strictly.
func applyPatch(t *testing.T, dir, path, ops string, target *struct {
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
}, objs []object) []object {
	t.Helper()
	if path != "" {
		for _, doc := range documents(t, filepath.Join(dir, path)) {
			o := decode(t, filepath.Join(dir, path), doc)
			if target != nil && !strings.HasSuffix(o.key, "/"+target.Kind) {
				t.Errorf("%s patches a %s but targets kind %s", path, o.key, target.Kind)
			}
		}
		return objs
	}
	opsJSON, err := yaml.YAMLToJSON([]byte(ops))
	if err != nil {
		t.Fatalf("%s: inline patch: %v", dir, err)
	}
	patch, err := jsonpatch.DecodePatch(opsJSON)
	if err != nil {
		t.Fatalf("%s: inline patch: %v", dir, err)
	}
	hit := 0
	for i, o := range objs {
		var meta struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		_ = json.Unmarshal(o.raw, &meta)
		if !strings.HasSuffix(o.key, "/"+target.Kind) || (target.Name != "" && meta.Metadata.Name != target.Name) {
			continue
		}
		out, err := patch.Apply(o.raw)
		if err != nil {
			t.Fatalf("%s: patch on %s %s: %v", dir, o.key, meta.Metadata.Name, err)
		}
		objs[i] = decode(t, dir+" (patched)", out)
		hit++
	}
	if hit == 0 {
		t.Errorf("%s: the inline patch targets %s %q, which no resource is", dir, target.Kind, target.Name)
	}
	return objs
}

func overlays(t *testing.T) []string {
	dirs, err := filepath.Glob("overlays/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no overlays: %v", err)
	}
	return append([]string{"base"}, dirs...)
}

// Every file under deploy/kubernetes is part of some kustomization, so
// none escapes the strict decode.
func TestEveryManifestIsReferenced(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range overlays(t) {
		var k kustomization
		b, _ := os.ReadFile(filepath.Join(d, "kustomization.yaml"))
		_ = yaml.Unmarshal(b, &k)
		seen[filepath.Join(d, "kustomization.yaml")] = true
		for _, r := range k.Resources {
			seen[filepath.Join(d, r)] = true
		}
		for _, p := range k.Patches {
			if p.Path != "" {
				seen[filepath.Join(d, p.Path)] = true
			}
		}
	}
	_ = filepath.Walk(".", func(p string, info os.FileInfo, _ error) error {
		if strings.HasSuffix(p, ".yaml") && !seen[p] {
			t.Errorf("%s is in no kustomization: the test would not check it", p)
		}
		return nil
	})
}

func TestManifestsDecodeStrictly(t *testing.T) {
	for _, d := range overlays(t) {
		t.Run(d, func(t *testing.T) {
			objs := tree(t, d)
			checkWorkloads(t, objs)
			checkFleet(t, objs)
		})
	}
}

// A misspelled field must fail, or the test above proves nothing.
func TestStrictDecodeRefusesAMisspelledField(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 1\n")
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(doc, &d); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("strict decode of spec.replica = %v, want an unknown-field error", err)
	}
}

func podSpecs(objs []object) map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{}
	for _, o := range objs {
		switch w := o.obj.(type) {
		case *appsv1.Deployment:
			out[w.Name] = w.Spec.Template.Spec
		case *appsv1.StatefulSet:
			out[w.Name] = w.Spec.Template.Spec
		}
	}
	return out
}

// checkWorkloads: requests on every container, non-root everywhere, the
// routers' probes on /health and /ready.
func checkWorkloads(t *testing.T, objs []object) {
	t.Helper()
	specs := podSpecs(objs)
	if len(specs) != 3 {
		t.Errorf("workloads %v, want two router Deployments and the engine StatefulSet", len(specs))
	}
	for name, ps := range specs {
		if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
			t.Errorf("%s: the pod must set runAsNonRoot", name)
		}
		for _, c := range ps.Containers {
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("%s/%s: no cpu and memory requests", name, c.Name)
			}
			if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
				t.Errorf("%s/%s: allowPrivilegeEscalation must be false", name, c.Name)
			}
			if !strings.HasPrefix(name, "narwhal-router-") {
				continue
			}
			if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/ready" ||
				c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/health" {
				t.Errorf("%s: readiness must be /ready and liveness /health", name)
			}
		}
	}
}

// checkFleet: the ConfigMap's fleet document loads, names the engines the
// StatefulSet runs, and selects the Kubernetes lease the Role grants.
func checkFleet(t *testing.T, objs []object) {
	t.Helper()
	var doc string
	var replicas int32
	var role *rbacv1.Role
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *corev1.ConfigMap:
			if v.Name == "narwhal-fleet" {
				doc = v.Data["fleet.json"]
			}
		case *appsv1.StatefulSet:
			replicas = *v.Spec.Replicas
		case *rbacv1.Role:
			role = v
		}
	}
	path := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := fleet.LoadWith(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("the fleet ConfigMap does not load: %v", err)
	}
	if len(cfg.Engines) != int(replicas) {
		t.Errorf("the fleet lists %d engines, the StatefulSet runs %d", len(cfg.Engines), replicas)
	}
	for i, e := range cfg.Engines {
		if want := fmt.Sprintf("http://narwhal-engine-%d.narwhal-engine:8000", i); strings.TrimRight(e.URL, "/") != want {
			t.Errorf("engines[%d].url %s, want %s (the StatefulSet pod's stable name)", i, e.URL, want)
		}
	}
	l := cfg.Recovery.Lease
	if l.Backend != fleet.LeaseKubernetes || role == nil || !bytes.Contains(mustJSON(role.Rules), []byte(`"`+l.KubernetesName+`"`)) {
		t.Errorf("lease %+v: want the kubernetes backend on the Lease the Role grants", l)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
