package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReasonsPageIsCurrent: docs/reference/reasons.md is what the code
// generates today, so a new reason or hint fails here until `make docs`.
func TestReasonsPageIsCurrent(t *testing.T) {
	want, err := ReasonsMarkdown(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, ReasonsFile))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, string(got)); d != "" {
		t.Errorf("%s is stale: run `make docs` and commit (-generated +committed):\n%s", ReasonsFile, d)
	}
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
