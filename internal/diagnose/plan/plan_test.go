package plan

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/launch"
)

// fullPlan sets every field.
func fullPlan(t *testing.T) Plan {
	t.Helper()
	m, err := newModelRef("meta-llama/Llama-3.1-8B-Instruct", ModelFromFleetDoc)
	if err != nil {
		t.Fatal(err)
	}
	return Plan{Model: m, MaxModelLen: 32768, GPUMemoryUtilization: 0.93, EnforceEager: true,
		CUDAGraphCaptureSizes: []int64{1, 2, 4, 8}, MaxCUDAGraphCapture: 8, DType: DTypeHalf,
		TensorParallelSize: 2, PipelineParallelSize: 1, KVCacheDType: KVCacheFP8, MaxNumSeqs: 128,
		MaxNumBatchedTokens: 8192, Quantization: QuantFP8, Port: 8001}
}

// TestPlanHasNoStringField walks the Plan type: every field a correction
// can change is an integer, float, bool, integer list or a small-integer
// enum; the only text is inside ModelRef, whose fields are unexported.
func TestPlanHasNoStringField(t *testing.T) {
	var check func(reflect.Type, string)
	check = func(ty reflect.Type, path string) {
		switch ty.Kind() {
		case reflect.String:
			t.Errorf("%s is a string: a plan field must be numeric, bool or a closed enum", path)
		case reflect.Slice:
			check(ty.Elem(), path+"[]")
		case reflect.Struct:
			for i := 0; i < ty.NumField(); i++ {
				f := ty.Field(i)
				if ty == reflect.TypeFor[ModelRef]() {
					if f.IsExported() {
						t.Errorf("ModelRef.%s is exported: only this package may make a model reference", f.Name)
					}
					continue
				}
				check(f.Type, path+"."+f.Name)
			}
		case reflect.Int, reflect.Int64, reflect.Uint8, reflect.Float64, reflect.Bool:
		default:
			t.Errorf("%s has kind %s", path, ty.Kind())
		}
	}
	check(reflect.TypeFor[Plan](), "Plan")
}

// TestRendererImportBoundary: the plan package cannot see the diagnosis
// package's types, so no log-derived text type can reach a renderer.
func TestRendererImportBoundary(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	fs := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fs, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p == "github.com/narwhal-go/narwhal/internal/diagnose" || strings.HasPrefix(p, "github.com/narwhal-go/narwhal/internal/diagnose/") {
				t.Errorf("%s imports %s: the renderer must not depend on the diagnosis package", f, p)
			}
		}
	}
}

// closedArg is every character a rendered argument may contain: the flag
// table, digits, enum names, the compilation-config JSON and a model
// reference.
var closedArg = regexp.MustCompile(`^[A-Za-z0-9._/+=@:,{}\[\]"-]+$`)

func TestArgsFromTypedFieldsOnly(t *testing.T) {
	p := fullPlan(t)
	argv, err := p.Args()
	if err != nil {
		t.Fatal(err)
	}
	want := `vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8001 --tensor-parallel-size 2 --pipeline-parallel-size 1 --dtype half --quantization fp8 --kv-cache-dtype fp8 --max-model-len 32768 --gpu-memory-utilization 0.93 --max-num-seqs 128 --max-num-batched-tokens 8192 --enforce-eager --compilation-config {"cudagraph_capture_sizes":[1,2,4,8],"max_cudagraph_capture_size":8}`
	if got := strings.Join(argv, " "); got != want {
		t.Fatalf("argv\n got %s\nwant %s", got, want)
	}
	for _, a := range argv {
		if !closedArg.MatchString(a) {
			t.Errorf("argument %q leaves the closed character set", a)
		}
	}
	cmd, err := p.Command()
	if err != nil || !strings.Contains(cmd, `'{"cudagraph_capture_sizes":[1,2,4,8],"max_cudagraph_capture_size":8}'`) {
		t.Fatalf("command %q err %v: the JSON word must be quoted", cmd, err)
	}
	var unset Plan
	unset.Model = p.Model
	argv, _ = unset.Args()
	if strings.Join(argv, " ") != "vllm serve meta-llama/Llama-3.1-8B-Instruct" {
		t.Fatalf("an unset plan renders only the model: %v", argv)
	}
}

func TestInvalidEnumOrRangeNotRendered(t *testing.T) {
	for name, mut := range map[string]func(*Plan){
		"dtype":        func(p *Plan) { p.DType = DType(99) },
		"kv":           func(p *Plan) { p.KVCacheDType = KVCacheDType(42) },
		"quant":        func(p *Plan) { p.Quantization = Quantization(200) },
		"util":         func(p *Plan) { p.GPUMemoryUtilization = 1.5 },
		"port":         func(p *Plan) { p.Port = 70000 },
		"negative len": func(p *Plan) { p.MaxModelLen = -1 },
		"sizes":        func(p *Plan) { p.CUDAGraphCaptureSizes = []int64{4, 2} },
		"zero size":    func(p *Plan) { p.CUDAGraphCaptureSizes = []int64{0} },
		"model source": func(p *Plan) { p.Model.source = ModelSource(9) },
	} {
		p := fullPlan(t)
		mut(&p)
		if _, err := p.Args(); err == nil {
			t.Errorf("%s: an invalid plan rendered", name)
		}
	}
	if _, err := (Plan{}).Args(); err == nil || !strings.Contains(err.Error(), "no model reference") {
		t.Fatalf("a plan without a model must not render: %v", err)
	}
}

func TestModelRefRefusesMetacharacters(t *testing.T) {
	for _, bad := range []string{
		"m; rm -rf /", "m --trust-remote-code", "$(id)", "`id`", "m\nvllm", "\x1b[31mred", "m'x", `m"x`,
		"../../etc/passwd", "-m", "", strings.Repeat("a", 300), "m|x", "m&x", "m>x",
	} {
		cfg := &fleet.Config{Model: bad}
		if _, err := FromFleet(cfg, ""); err == nil {
			t.Errorf("model %q accepted", bad)
		}
		if _, _, err := ParseArgv([]string{"vllm", "serve", "ok/model", "--model", bad}); err == nil {
			t.Errorf("argv model %q accepted", bad)
		}
		b, _ := json.Marshal(map[string]any{"schema": FileSchema, "schema_version": 1, "plan": map[string]any{"model": bad}})
		if _, err := Parse(b); err == nil {
			t.Errorf("plan file model %q accepted", bad)
		}
	}
	for _, good := range []string{"meta-llama/Llama-3.1-8B", "/models/llama-3", "./m", "Qwen/Qwen3-32B-FP8"} {
		if _, err := newModelRef(good, ModelFromFleetDoc); err != nil {
			t.Errorf("model %q refused: %v", good, err)
		}
	}
}

func TestEnumJSONClosed(t *testing.T) {
	var d DType
	if err := json.Unmarshal([]byte(`"bfloat16; rm"`), &d); err == nil {
		t.Fatal("an unknown dtype decoded")
	}
	if err := json.Unmarshal([]byte(`"float16"`), &d); err != nil || d != DTypeHalf {
		t.Fatalf("alias float16: %v %v", d, err)
	}
	if _, err := json.Marshal(DType(77)); err == nil {
		t.Fatal("an invalid dtype encoded")
	}
	b, _ := json.Marshal(struct {
		A DType
		B KVCacheDType
	}{})
	if string(b) != `{"A":null,"B":null}` {
		t.Fatalf("unset enums encode as null: %s", b)
	}
}

func TestDiffAndApply(t *testing.T) {
	base := fullPlan(t)
	base.EnforceEager, base.MaxModelLen = false, 131072
	fixed := base.Clone()
	fixed.MaxModelLen, fixed.EnforceEager, fixed.GPUMemoryUtilization = 65536, true, 0.95
	d := Diff(base, fixed)
	var paths []string
	for _, c := range d {
		paths = append(paths, c.String())
	}
	want := "enforce_eager: unset -> true|gpu_memory_utilization: 0.93 -> 0.95|max_model_len: 131072 -> 65536"
	if strings.Join(paths, "|") != want {
		t.Fatalf("diff %s, want %s", strings.Join(paths, "|"), want)
	}
	got, err := Apply(base, d)
	if err != nil || len(Diff(got, fixed)) != 0 {
		t.Fatalf("apply: %v, left %v", err, Diff(got, fixed))
	}
	other := base.Clone()
	other.MaxModelLen = 4096
	if _, err := Apply(other, d); err == nil {
		t.Fatal("a diff applied to a plan it does not belong to")
	}
	b, _ := json.Marshal(d)
	if !strings.Contains(string(b), `{"path":"max_model_len","from":131072,"to":65536}`) {
		t.Fatalf("change JSON: %s", b)
	}
}

func TestParseLaunchPlanArgv(t *testing.T) {
	cfg := &fleet.Config{Model: "meta-llama/Llama-3.1-8B", Engines: []fleet.Engine{{IID: "e0", URL: "http://10.0.0.1:8100"}},
		Hardware:       &fleet.Hardware{TensorParallel: 2},
		EngineContract: &fleet.EngineContract{ModelDtype: "bfloat16", KVCacheDtype: "auto"},
		Engine:         fleet.EngineSettings{EngineAPIKeyEnv: "NARWHAL_ENGINE_KEY"}}
	plans, err := launch.Plan(cfg, launch.Options{Memory: &launch.MemoryAdvice{MaxModelLen: 16384, GPUMemoryUtilization: 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(map[string]any{"schema": launch.Schema, "schema_version": launch.SchemaVersion, "engine": plans[0]})
	f, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := f.Plan
	if p.Model.Name() != cfg.Model || p.Port != 8100 || p.TensorParallelSize != 2 || p.MaxModelLen != 16384 ||
		p.GPUMemoryUtilization != 0.9 || p.DType != DTypeBFloat16 || p.KVCacheDType != KVCacheAuto {
		t.Fatalf("parsed %+v", p)
	}
	if strings.Join(f.Unmodelled, ",") != "--host,--kv-transfer-config,--served-model-name" {
		t.Fatalf("unmodelled %v", f.Unmodelled)
	}
	fp, err := FromFleet(cfg, "e0")
	if err != nil || fp.Port != 8100 || fp.TensorParallelSize != 2 || fp.DType != DTypeBFloat16 || fp.Model.Source() != ModelFromFleetDoc {
		t.Fatalf("from fleet %+v %v", fp, err)
	}
}

func TestPlanFileRoundTrip(t *testing.T) {
	p := fullPlan(t)
	b, err := Marshal(p, "/models/m")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(Diff(p, f.Plan)) != 0 || f.ModelDir != "/models/m" || f.Plan.Model.Source() != ModelFromFleetDoc {
		t.Fatalf("round trip: %v %+v", Diff(p, f.Plan), f)
	}
	// An unset capture list is written as [] and reads back as unset.
	p.CUDAGraphCaptureSizes = nil
	b, _ = Marshal(p, "")
	if f, err = Parse(b); err != nil || len(Diff(p, f.Plan)) != 0 {
		t.Fatalf("unset capture sizes: %v %v", err, Diff(p, f.Plan))
	}
	if _, err := Parse([]byte(`{"schema":"narwhal.diagnose.plan","schema_version":1,"plan":{"max_model_len":1,"typo":2}}`)); err == nil {
		t.Fatal("an unknown plan field was accepted")
	}
	if _, err := Parse([]byte(`{"schema":"narwhal.diagnose.plan","schema_version":2,"plan":{}}`)); err == nil {
		t.Fatal("a newer schema version was accepted")
	}
}

func TestChangeJSONRoundTrip(t *testing.T) {
	base := fullPlan(t)
	other := base.Clone()
	other.MaxModelLen, other.DType, other.EnforceEager, other.CUDAGraphCaptureSizes, other.GPUMemoryUtilization = 4096, DTypeBFloat16, false, nil, 0.85
	d := Diff(base, other)
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back []Change
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := Apply(base, back)
	if err != nil || len(Diff(got, other)) != 0 {
		t.Fatalf("round trip: %v %v", err, Diff(got, other))
	}
	if err := json.Unmarshal([]byte(`[{"path":"dtype","from":null,"to":"bf16; rm"}]`), &back); err == nil {
		t.Fatal("a stored change outside the closed set decoded")
	}
}
