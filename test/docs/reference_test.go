package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGeneratedPagesAreCurrent: the reasons, labels and metrics pages are
// what the code generates today, so a new reason, hint, label or metric
// fails here until `make docs` (flags.md needs the manager built: make
// verify-generated checks it).
func TestGeneratedPagesAreCurrent(t *testing.T) {
	for file, gen := range map[string]func(string) (string, error){
		ReasonsFile: ReasonsMarkdown,
		LabelsFile:  LabelsMarkdown,
		MetricsFile: MetricsMarkdown,
	} {
		want, err := gen(root)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, string(got)); d != "" {
			t.Errorf("%s is stale: run `make docs` and commit (-generated +committed):\n%s", file, d)
		}
	}
}

// TestMetrics: a metric's name, type, labels and help are read from its
// prometheus.New… call.
func TestMetrics(t *testing.T) {
	metrics, err := Metrics(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metrics {
		if m.Name == "packline_run_duration_seconds" {
			want := Metric{Name: m.Name, Type: "histogram", Help: "Time from a run's first attempt to its end, by kind and result.",
				Package: "controllers/pipeline", Labels: []string{"kind", "result"}}
			if d := cmp.Diff(want, m); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			return
		}
	}
	t.Errorf("packline_run_duration_seconds not found in %v", metrics)
}

// TestControllerReasons: constants from several packages are found, with
// their own comment or, lacking one, their group's.
func TestControllerReasons(t *testing.T) {
	reasons, err := ControllerReasons(root)
	if err != nil {
		t.Fatal(err)
	}
	byValue := map[string]Reason{}
	for _, r := range reasons {
		byValue[r.Value] = r
	}
	for value, want := range map[string]Reason{
		"WorkspaceConflict": {Value: "WorkspaceConflict", Const: "ReasonWorkspaceConflict", Package: "controllers/pipeline"},
		"DeliveryConflict":  {Value: "DeliveryConflict", Const: "ReasonDeliveryConflict", Package: "controllers/delivery"},
		"EntitlementDenied": {Value: "EntitlementDenied", Const: "ReasonEntitlementDenied", Package: "controllers",
			Doc: "Reasons a Claim's requester is not entitled to render it."},
	} {
		got, ok := byValue[value]
		if !ok {
			t.Errorf("reason %s not found", value)
			continue
		}
		if want.Doc == "" {
			want.Doc = got.Doc
			if got.Doc == "" || strings.HasPrefix(got.Doc, got.Const) {
				t.Errorf("%s: doc %q: want its comment without the constant's name", value, got.Doc)
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", value, d)
		}
	}
}

func TestParseUsage(t *testing.T) {
	usage := "Usage of manager:\n" +
		"  -backoff-base duration\n    \tFirst retry delay. (default 10s)\n" +
		"  -leader-elect\n    \tElect a leader.\n" +
		"  -worker-image string\n    \tImage of the worker,\n    \tin every Job. (default \"ghcr.io/x:latest\")\n"
	want := []Flag{
		{Name: "backoff-base", Type: "duration", Default: "10s", Usage: "First retry delay."},
		{Name: "leader-elect", Type: "bool", Usage: "Elect a leader."},
		{Name: "worker-image", Type: "string", Default: `"ghcr.io/x:latest"`, Usage: "Image of the worker, in every Job."},
	}
	if d := cmp.Diff(want, ParseUsage(usage)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
