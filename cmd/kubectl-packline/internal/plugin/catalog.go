package plugin

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/packline/packline/api/v1alpha1"
)

func catalogFlags(fs *pflag.FlagSet, o *options) {
	fs.BoolVarP(&o.all, "all", "A", false, "also list the templates you may not claim here, with the reason")
}

// runCatalog lists the ClaimTemplates the user may claim in the namespace:
// their values (name:type, * required, =default), exposures and Ready.
func runCatalog(ctx context.Context, e *env, o *options, args []string) (int, error) {
	if len(args) != 0 {
		return ExitUsage, usagef("catalog takes no arguments (the namespace is -n)")
	}
	if err := e.connect(); err != nil {
		return ExitFailed, err
	}
	var list v1alpha1.ClaimTemplateList
	if err := e.c.List(ctx, &list); err != nil {
		return ExitFailed, fmt.Errorf("listing ClaimTemplates (the catalogue needs list on claimtemplates.packline.dev, cluster-wide): %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	acc, err := e.newAccess(ctx)
	if err != nil {
		return ExitFailed, err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	header := "NAME\tREADY\tVALUES\tEXPOSURES"
	if o.all {
		header += "\tCLAIMABLE\tWHY NOT"
	}
	fmt.Fprintln(tw, header)
	shown := 0
	for i := range list.Items {
		tpl := &list.Items[i]
		v := acc.check(ctx, tpl, nil)
		if !v.Claimable && !o.all {
			continue
		}
		shown++
		row := []string{tpl.Name, ready(tpl), valuesColumn(tpl), exposuresColumn(tpl)}
		if o.all {
			claimable := "yes"
			if v.Unknown {
				claimable = "unknown"
			} else if !v.Claimable {
				claimable = "no"
			}
			row = append(row, claimable, orDash(joinWhy(v.Why)))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return ExitFailed, err
	}
	if shown == 0 {
		fmt.Fprintf(e.stderr, "No ClaimTemplate may be claimed by %s in namespace %s (of %d); --all shows why.\n", acc.me.Username, e.ns, len(list.Items))
	}
	return ExitOK, nil
}

func ready(tpl *v1alpha1.ClaimTemplate) string {
	c := apimeta.FindStatusCondition(tpl.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return "Unknown"
	}
	if c.Status == "True" {
		return "True"
	}
	return string(c.Status) + " (" + c.Reason + ")"
}

func valuesColumn(tpl *v1alpha1.ClaimTemplate) string {
	if tpl.Spec.ValuesSchema == nil {
		return "-"
	}
	s, err := ParseSchema(tpl.Spec.ValuesSchema.Raw)
	if err != nil {
		return "<invalid schema>"
	}
	return orDash(strings.Join(DescribeValues(s), ","))
}

func exposuresColumn(tpl *v1alpha1.ClaimTemplate) string {
	if len(tpl.Spec.Exposures) == 0 {
		return string(v1alpha1.ExposureClusterIP)
	}
	var out []string
	for _, x := range tpl.Spec.Exposures {
		out = append(out, string(x.Type))
	}
	return strings.Join(out, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
