package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testSchema = `{"type":"object","required":["image"],"properties":{
  "replicas":{"type":"integer","default":1},
  "ratio":{"type":"number"},
  "debug":{"type":"boolean"},
  "image":{"type":"string"},
  "tag":{"type":["string","null"]},
  "size":{"enum":["S","M"]},
  "ports":{"type":"array"},
  "env":{"type":"object","properties":{"LEVEL":{"type":"integer"}}}}}`

func TestParseValues(t *testing.T) {
	schema, err := ParseSchema([]byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		files   []NamedBytes
		sets    []string
		want    map[string]any
		wantErr string
	}{
		{name: "typed by the schema", sets: []string{"replicas=2", "ratio=0.5", "debug=true", "image=2", "ports=[80, 443]"},
			want: map[string]any{"replicas": int64(2), "ratio": 0.5, "debug": true, "image": "2", "ports": []any{float64(80), float64(443)}}},
		{name: "nested field typed by its property", sets: []string{"env.LEVEL=3", "env.OTHER=x"},
			want: map[string]any{"env": map[string]any{"LEVEL": int64(3), "OTHER": "x"}}},
		{name: "type list: first that fits", sets: []string{"tag=null"}, want: map[string]any{"tag": "null"}},
		{name: "no type: inferred", sets: []string{"size=M", "free=7", "flag=false"},
			want: map[string]any{"size": "M", "free": int64(7), "flag": false}},
		{name: "escaped dot", sets: []string{`a\.b=c`}, want: map[string]any{"a.b": "c"}},
		{name: "files merge, --set wins", files: []NamedBytes{
			{Name: "a.yaml", Data: []byte("replicas: 1\nenv:\n  LEVEL: 1\n  KEEP: kept\n")},
			{Name: "b.yaml", Data: []byte("env:\n  LEVEL: 2\n")}},
			sets: []string{"replicas=3"},
			want: map[string]any{"replicas": int64(3), "env": map[string]any{"LEVEL": float64(2), "KEEP": "kept"}}},
		{name: "every bad value named by field", sets: []string{"replicas=two", "debug=maybe", "ratio=x"},
			wantErr: `--set replicas=two: spec.values.replicas: "two" is not an integer; --set debug=maybe: spec.values.debug: "maybe" is not a boolean (true or false); --set ratio=x: spec.values.ratio: "x" is not a number`},
		{name: "wrong container kind", sets: []string{"ports={a: 1}"},
			wantErr: `--set ports={a: 1}: spec.values.ports: "{a: 1}" is a object, not an array`},
		{name: "not KEY=VALUE", sets: []string{"replicas"}, wantErr: `--set replicas: want KEY=VALUE (nested keys with dots: a.b=c)`},
		{name: "through a scalar", sets: []string{"image=x", "image.tag=y"}, wantErr: `--set image.tag=y: spec.values.image is a string, not a mapping`},
		{name: "file not a mapping", files: []NamedBytes{{Name: "v.yaml", Data: []byte("- 1\n")}},
			wantErr: "v.yaml: not a YAML mapping of values: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseValues(schema, tc.files, tc.sets)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if tc.wantErr != "" {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeValues(t *testing.T) {
	schema, err := ParseSchema([]byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"debug:boolean", "env:object", "image:string*", "ports:array", "ratio:number", "replicas:integer=1", "size:enum(S|M)", "tag:string|null"}
	if diff := cmp.Diff(want, DescribeValues(schema)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := DescribeValues(nil); got != nil {
		t.Errorf("no schema: %v", got)
	}
}

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in, kind, name, err string
	}{
		{in: "claim/app", kind: "Claim", name: "app"},
		{in: "clm/app", kind: "Claim", name: "app"},
		{in: "artifacts.packline.dev/m", kind: "Artifact", name: "m"},
		{in: "ctpl/t", err: `"ctpl": KIND must be one of artifact, claim`},
		{in: "app", err: `"app": want KIND/NAME, for example claim/my-app`},
		{in: "claim/a/b", err: `"claim/a/b": want KIND/NAME, for example claim/my-app`},
	} {
		kind, name, err := ParseRef(tc.in, "Claim", "Artifact")
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if diff := cmp.Diff([]string{tc.kind, tc.name, tc.err}, []string{kind, name, gotErr}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.in, diff)
		}
	}
}
