package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/cmdresult"
	"github.com/narwhal-go/narwhal/internal/diagnose"
	"github.com/narwhal-go/narwhal/internal/units"
)

// writeDiagnoseText prints the diagnosis for a person: the failure, the
// facts, each ranked correction as a diff with its trade-offs, and what
// to do next. Every value printed comes from typed fields.
func writeDiagnoseText(w io.Writer, run diagnoseRun, dir string) {
	d := run.diag
	writeSupportFirst(w, "narwhal diagnose", run.support)
	if d.Status == diagnose.StatusNoFailure {
		fmt.Fprintf(w, "no failure: the log (%d lines) shows no exception or engine error\n", d.Lines)
		writeFacts(w, d.Facts)
		return
	}
	fmt.Fprintf(w, "family       %s (%s)\n", d.Family, d.Status)
	fmt.Fprintf(w, "fingerprint  %s\n", fingerprintText(d.Fingerprint))
	fmt.Fprintf(w, "             %s\n", d.FingerprintDigest)
	writeFacts(w, d.Facts)
	for _, rj := range d.Rejected {
		fmt.Fprintf(w, "  rejected   %s (line %d): %s\n", rj.Field, rj.Line, rj.Reason)
	}
	if v := d.Facts.EngineVersion; v != nil && run.ruleStatus != "" {
		fmt.Fprintf(w, "rule status  %s for vLLM %s (promotions in %s)\n", run.ruleStatus, diagnose.EngineMinor(*v), dir)
	}
	fmt.Fprintln(w)
	io.WriteString(w, diagnose.RemedyText(run.remedy, run.apps))
	for _, s := range run.warnings {
		fmt.Fprintf(w, "warning      %s\n", s)
	}
	fmt.Fprintf(w, "records      failure %s", run.failureDigest)
	if len(run.appDigests) > 0 {
		fmt.Fprintf(w, ", %d application(s)", len(run.appDigests))
	}
	fmt.Fprintf(w, " in %s\n", dir)
	if len(run.apps) > 0 {
		fmt.Fprintf(w, "next         boot the corrected plan, then: narwhal diagnose prove --application %s --boot-log LOG --store %s\n", run.apps[0].ApplicationID, dir)
	}
}

func fingerprintText(f diagnose.Fingerprint) string {
	class, module := "(no exception)", "(call site unknown)"
	if f.ExceptionClass != nil {
		class = f.ExceptionClass.String()
	}
	if f.CallSiteModule != nil {
		module = f.CallSiteModule.String()
	}
	return fmt.Sprintf("%s at %s (%s)", class, module, f.Family)
}

// writeFacts prints every fact the log stated, by name; byte figures also
// in GiB.
func writeFacts(w io.Writer, f diagnose.Facts) {
	b, err := json.Marshal(f)
	if err != nil {
		return
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return
	}
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if string(v) != "null" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return
	}
	fmt.Fprintln(w, "facts")
	for _, k := range keys {
		fmt.Fprintf(w, "  %-26s %s\n", k, factValue(k, m[k]))
	}
}

func factValue(key string, raw json.RawMessage) string {
	var n int64
	if strings.HasSuffix(key, "_bytes") && json.Unmarshal(raw, &n) == nil {
		return fmt.Sprintf("%s (%d B)", units.GiB(n), n)
	}
	switch key {
	case "engine_version":
		var v diagnose.EngineVersion
		if json.Unmarshal(raw, &v) == nil {
			return v.String()
		}
	case "compute_capability", "required_compute_capability":
		var c diagnose.ComputeCapability
		if json.Unmarshal(raw, &c) == nil {
			return c.String()
		}
	}
	return strings.Trim(string(raw), `"`)
}

// diagnoseApplicationJSON is one application as the JSON output shows it,
// with its derived result and rendered command.
type diagnoseApplicationJSON struct {
	Record      string               `json:"record"`
	Result      diagnose.Result      `json:"result"`
	Command     *string              `json:"command"`
	Application diagnose.Application `json:"application"`
}

func writeDiagnoseJSON(w io.Writer, run diagnoseRun, dir string) error {
	apps := []diagnoseApplicationJSON{}
	arts := []cmdresult.Artifact{}
	if run.failureDigest != "" {
		arts = append(arts, cmdresult.Artifact{Kind: "evidence_record", Path: dir + "/" + run.failureDigest, State: "created"})
	}
	for i, a := range run.apps {
		var cmd *string
		if s, err := a.CorrectedPlan.Command(); err == nil {
			cmd = &s
		}
		apps = append(apps, diagnoseApplicationJSON{Record: run.appDigests[i], Result: a.Result(), Command: cmd, Application: a})
		arts = append(arts, cmdresult.Artifact{Kind: "evidence_record", Path: dir + "/" + run.appDigests[i], State: "created"})
	}
	data := map[string]any{
		"diagnosis": run.diag, "remedy": run.remedy, "log_digest": run.logDigest, "failure_record": nilIfEmpty(run.failureDigest),
		"applications": apps, "warnings": nonNilStrings(run.warnings), "engine_support": run.support,
	}
	r := cmdresult.Result{Command: "narwhal diagnose", Operation: "diagnose", Status: cmdresult.Success, Data: data, Artifacts: arts}
	return r.Write(w, nil)
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
