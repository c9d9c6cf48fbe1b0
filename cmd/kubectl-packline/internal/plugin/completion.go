package plugin

import (
	"context"
	"fmt"
	"strings"
)

// runCompletion prints a bash completion script: verbs, flags, and
// KIND/NAME from `kubectl get -o name` (so with the user's own rights).
// It completes kubectl-packline run by itself; `kubectl packline <TAB>`
// is completed by kubectl, through kubectl_complete-packline (complete.go).
func runCompletion(_ context.Context, e *env, _ *options, args []string) (int, error) {
	if len(args) != 1 || args[0] != "bash" {
		return ExitUsage, usagef("completion takes one shell: bash")
	}
	var names []string
	for _, v := range verbs() {
		names = append(names, v.name)
	}
	fmt.Fprintf(e.stdout, bashCompletion, strings.Join(names, " "))
	return ExitOK, nil
}

const bashCompletion = `# bash completion for kubectl-packline
_kubectl_packline() {
    local cur prev verb
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    verb="${COMP_WORDS[1]}"
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=( $(compgen -W "%s" -- "$cur") ); return
    fi
    case "$prev" in
        -f|--values|--key|--kubeconfig) COMPREPLY=( $(compgen -f -- "$cur") ); return ;;
        --exposure) COMPREPLY=( $(compgen -W "ClusterIP NodePort LoadBalancer Ingress" -- "$cur") ); return ;;
        --dry-run) COMPREPLY=( $(compgen -W "local server none" -- "$cur") ); return ;;
        -n|--namespace) COMPREPLY=( $(compgen -W "$(kubectl get namespaces -o name 2>/dev/null | cut -d/ -f2)" -- "$cur") ); return ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=( $(compgen -W "--kubeconfig --context --namespace -n --set --values -f --exposure --host --tag --plain-http --dry-run --diff --tail --key --all --port" -- "$cur") ); return
    fi
    case "$verb" in
        why|rerun) COMPREPLY=( $(compgen -W "$(kubectl get claims.packline.dev,artifacts.packline.dev,claimtemplates.packline.dev -o name 2>/dev/null | sed 's/\.packline\.dev//')" -- "$cur") ) ;;
        pull|verify) COMPREPLY=( $(compgen -W "$(kubectl get claims.packline.dev,artifacts.packline.dev -o name 2>/dev/null | sed 's/\.packline\.dev//')" -- "$cur") ) ;;
        claim) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=( $(compgen -W "$(kubectl get claimtemplates.packline.dev -o name 2>/dev/null | cut -d/ -f2)" -- "$cur") ) ;;
        completion) COMPREPLY=( $(compgen -W "bash" -- "$cur") ) ;;
    esac
}
complete -F _kubectl_packline kubectl-packline
`
