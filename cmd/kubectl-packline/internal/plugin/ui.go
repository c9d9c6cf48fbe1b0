package plugin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

func uiFlags(fs *pflag.FlagSet, o *options) {
	fs.IntVar(&o.port, "port", 0, "the port on 127.0.0.1 to serve on (0: a free one)")
}

// runUI serves the catalogue page on 127.0.0.1 until interrupted. Every
// request it makes to the cluster is made with the user's own kubeconfig,
// as the other verbs do: the page holds no credential, and no server with
// rights of its own is involved. What guards the page from other local
// processes and web pages is uiGuard.
func runUI(ctx context.Context, e *env, o *options, args []string) (int, error) {
	if len(args) != 0 {
		return ExitUsage, usagef("ui takes no arguments (the namespace is -n)")
	}
	if o.port < 0 || o.port > 65535 {
		return ExitUsage, usagef("--port: %d is not a port", o.port)
	}
	if err := e.connect(); err != nil {
		return ExitFailed, err
	}
	acc, err := e.newAccess(ctx)
	if err != nil {
		return ExitFailed, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.port)))
	if err != nil {
		return ExitFailed, fmt.Errorf("--port: %w", err)
	}
	g, err := newUIGuard(ln.Addr().String())
	if err != nil {
		ln.Close()
		return ExitFailed, err
	}
	s := &uiServer{e: e, acc: acc, accAt: time.Now(), csrf: g.csrf}
	srv := &http.Server{Handler: g.wrap(s.routes()), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(e.stdout, "Serving the packline catalogue of namespace %s, as %s, at\n  %s\nOnly this URL opens it (its token is new each run). Ctrl-C stops it.\n", e.ns, acc.me.Username, g.url())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return ExitFailed, err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	return ExitOK, nil
}

// uiGuard keeps the page to the user who started it. Any web page the
// browser has open, and any local process, can send requests to
// 127.0.0.1; each request the page's server answers acts with the user's
// credentials. So:
//   - every path is under /s/TOKEN/, a random token printed once on the
//     terminal: a page that does not know it reaches nothing;
//   - Host must be the listening address, so a DNS-rebound name resolving
//     to 127.0.0.1 is refused;
//   - a POST must come from the page's own origin (Origin), carry the
//     per-session CSRF token the page got in its HTML (a custom header,
//     which a cross-origin form cannot send and a cross-origin fetch
//     cannot send without a CORS preflight this server never grants), and
//     be JSON;
//   - responses are not cached, not framed, and send no Referer (the URL
//     holds the token).
type uiGuard struct {
	host, token, csrf string
}

func newUIGuard(hostport string) (*uiGuard, error) {
	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	csrf, err := randomToken()
	if err != nil {
		return nil, err
	}
	return &uiGuard{host: hostport, token: token, csrf: csrf}, nil
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making the page's token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (g *uiGuard) prefix() string { return "/s/" + g.token + "/" }

func (g *uiGuard) url() string { return "http://" + g.host + g.prefix() }

// uiCSRFHeader carries the per-session CSRF token on every POST.
const uiCSRFHeader = "X-Packline-CSRF"

func (g *uiGuard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
		if r.Host != g.host {
			http.Error(w, "wrong Host: open the URL kubectl packline ui printed", http.StatusForbidden)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, g.prefix())
		if !ok {
			http.NotFound(w, r)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodPost:
			if r.Header.Get("Origin") != "http://"+g.host {
				http.Error(w, "cross-origin request refused", http.StatusForbidden)
				return
			}
			if !equalTokens(r.Header.Get(uiCSRFHeader), g.csrf) {
				http.Error(w, "missing or wrong "+uiCSRFHeader+" header", http.StatusForbidden)
				return
			}
			if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/json" {
				http.Error(w, "want Content-Type: application/json", http.StatusUnsupportedMediaType)
				return
			}
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + rest
		next.ServeHTTP(w, r2)
	})
}

func equalTokens(a, b string) bool {
	if len(a) != len(b) || a == "" {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return v == 0
}

// uiServer answers the page's requests, each with the user's client.
type uiServer struct {
	e    *env
	csrf string

	mu    sync.Mutex
	acc   *access
	accAt time.Time
}

// access is the user's identity, namespace labels and discovery, made
// again after a minute so a new label or RoleBinding shows.
func (s *uiServer) access(ctx context.Context) (*access, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.acc == nil || time.Since(s.accAt) > time.Minute {
		acc, err := s.e.newAccess(ctx)
		if err != nil {
			return nil, err
		}
		s.acc, s.accAt = acc, time.Now()
	}
	return s.acc, nil
}

func (s *uiServer) routes() http.Handler {
	mux := http.NewServeMux()
	static, err := fs.Sub(uiAssets, "ui")
	if err != nil {
		panic(err)
	}
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("GET /api/templates", s.templates)
	mux.HandleFunc("GET /api/status", s.status)
	mux.HandleFunc("POST /api/validate", s.validate)
	mux.HandleFunc("POST /api/preview", s.preview)
	mux.HandleFunc("POST /api/claims", s.create)
	return mux
}

var indexTemplate = template.Must(template.ParseFS(uiAssets, "ui/index.html"))

func (s *uiServer) index(w http.ResponseWriter, r *http.Request) {
	acc, err := s.access(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = indexTemplate.Execute(w, map[string]string{"Namespace": s.e.ns, "User": acc.me.Username, "CSRF": s.csrf})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// uiError is an answer that is one message, for the page's general
// error box.
func uiError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]any{"errors": []FieldError{{Message: err.Error()}}})
}

// uiTemplate is one card of the catalogue.
type uiTemplate struct {
	Name      string          `json:"name"`
	Ready     string          `json:"ready"`
	Claimable bool            `json:"claimable"`
	Unknown   bool            `json:"unknown,omitempty"`
	Why       []string        `json:"why,omitempty"`
	Values    []string        `json:"values"`
	Exposures []string        `json:"exposures"`
	Private   bool            `json:"private,omitempty"`
	Schema    json.RawMessage `json:"schema,omitempty"`
}

// templates is the catalogue: every ClaimTemplate the user can list, each
// judged as catalog judges it (the admission webhook's rules).
func (s *uiServer) templates(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	acc, err := s.access(ctx)
	if err != nil {
		uiError(w, http.StatusBadGateway, err)
		return
	}
	var list v1alpha1.ClaimTemplateList
	if err := s.e.c.List(ctx, &list); err != nil {
		uiError(w, http.StatusBadGateway, fmt.Errorf("listing ClaimTemplates (the catalogue needs list on claimtemplates.packline.dev, cluster-wide): %w", err))
		return
	}
	out := []uiTemplate{}
	for i := range list.Items {
		tpl := &list.Items[i]
		v := acc.check(ctx, tpl, nil)
		t := uiTemplate{Name: tpl.Name, Ready: ready(tpl), Claimable: v.Claimable, Unknown: v.Unknown, Why: v.Why,
			Values: DescribeValues(mustSchema(tpl)), Exposures: strings.Split(exposuresColumn(tpl), ","), Private: tpl.Spec.Private()}
		if tpl.Spec.ValuesSchema != nil {
			t.Schema = json.RawMessage(tpl.Spec.ValuesSchema.Raw)
		}
		out = append(out, t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": s.e.ns, "templates": out})
}

func mustSchema(tpl *v1alpha1.ClaimTemplate) *Schema {
	if tpl.Spec.ValuesSchema == nil {
		return nil
	}
	s, _ := ParseSchema(tpl.Spec.ValuesSchema.Raw)
	return s
}

// uiClaimRequest is the page's form: each value is its path in the
// values and the text of its input, typed by the schema as --set types it.
type uiClaimRequest struct {
	Template  string    `json:"template"`
	Name      string    `json:"name"`
	Values    []uiValue `json:"values"`
	Exposure  string    `json:"exposure"`
	Host      string    `json:"host"`
	Tag       string    `json:"tag"`
	PlainHTTP bool      `json:"plainHTTP"`
}

type uiValue struct {
	Path []string `json:"path"`
	Raw  string   `json:"raw"`
}

// checked is a form turned into a Claim, with every problem the plugin's
// checks find, each on its field.
type checked struct {
	acc    *access
	tpl    *v1alpha1.ClaimTemplate
	claim  *v1alpha1.Claim
	errors []FieldError
}

// check builds the form's Claim and checks it as claim does: values typed
// by the schema (SetPath), then localProblems (claims.Violations and the
// user's rights).
func (s *uiServer) check(r *http.Request) (*checked, int, error) {
	ctx := r.Context()
	var req uiClaimRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("the form's request: %w", err)
	}
	acc, err := s.access(ctx)
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	tpl := &v1alpha1.ClaimTemplate{}
	if err := s.e.c.Get(ctx, client.ObjectKey{Name: req.Template}, tpl); err != nil {
		return nil, http.StatusBadGateway, fmt.Errorf("spec.templateRef.name: reading ClaimTemplate %s: %w", req.Template, err)
	}
	ck := &checked{acc: acc, tpl: tpl}
	var msgs []string
	switch {
	case req.Name == "":
		msgs = append(msgs, "metadata.name: required")
	default:
		for _, m := range validation.IsDNS1123Subdomain(req.Name) {
			msgs = append(msgs, "metadata.name: "+m)
		}
	}
	schema, err := ParseSchema(rawSchema(tpl))
	if err != nil {
		return nil, http.StatusBadGateway, fmt.Errorf("ClaimTemplate %s: %w", tpl.Name, err)
	}
	values := map[string]any{}
	for _, v := range req.Values {
		if len(v.Path) == 0 {
			continue
		}
		if err := SetPath(values, schema, v.Path, v.Raw); err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	o := &options{exposure: req.Exposure, host: req.Host, tag: req.Tag, plainHTTP: req.PlainHTTP}
	c, err := claimFor(tpl, s.e.ns, req.Name, o, values)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	ck.claim = c
	ck.errors = FieldErrors(msgs)
	// A value that did not parse is not in c: checking c may report it
	// again (as missing); its own error is the one to show.
	has := map[string]bool{}
	for _, fe := range ck.errors {
		has[fe.Field] = true
	}
	for _, fe := range FieldErrors(localProblems(ctx, acc, c, tpl)) {
		if fe.Field == "" || !has[fe.Field] {
			ck.errors = append(ck.errors, fe)
		}
	}
	return ck, http.StatusOK, nil
}

func rawSchema(tpl *v1alpha1.ClaimTemplate) []byte {
	if tpl.Spec.ValuesSchema == nil {
		return nil
	}
	return tpl.Spec.ValuesSchema.Raw
}

func (s *uiServer) validate(w http.ResponseWriter, r *http.Request) {
	ck, code, err := s.check(r)
	if err != nil {
		uiError(w, code, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"errors": nonNil(ck.errors)})
}

// preview is claim --dry-run=local: the worker's render, here.
func (s *uiServer) preview(w http.ResponseWriter, r *http.Request) {
	ck, code, err := s.check(r)
	if err != nil {
		uiError(w, code, err)
		return
	}
	if len(ck.errors) > 0 {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"errors": ck.errors})
		return
	}
	rd, err := s.e.render(r.Context(), ck.acc, ck.claim, ck.tpl)
	if err != nil {
		uiError(w, http.StatusUnprocessableEntity, err)
		return
	}
	type file struct {
		Name string `json:"name"`
		Data string `json:"data"`
	}
	files := []file{}
	for _, f := range rd.Files {
		files = append(files, file{f.Name, string(f.Data)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"header": rd.Header, "note": rd.Note, "files": files})
}

// create creates the Claim, as the user: the admission webhook records
// her as its requester and checks her rights again.
func (s *uiServer) create(w http.ResponseWriter, r *http.Request) {
	ck, code, err := s.check(r)
	if err != nil {
		uiError(w, code, err)
		return
	}
	if len(ck.errors) > 0 {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"errors": ck.errors})
		return
	}
	if err := s.e.c.Create(r.Context(), ck.claim); err != nil {
		code := http.StatusBadGateway
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsAlreadyExists(err) || apierrors.IsBadRequest(err) {
			code = http.StatusUnprocessableEntity
		}
		writeJSON(w, code, map[string]any{"errors": FieldErrors(apiMessages(err))})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"created": ck.claim.Name})
}

// apiMessages are an API error's causes (one per field for Invalid), or
// its message.
func apiMessages(err error) []string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		if d := st.Status().Details; d != nil && len(d.Causes) > 0 {
			var out []string
			for _, c := range d.Causes {
				if c.Field != "" && !strings.HasPrefix(c.Message, c.Field) {
					out = append(out, c.Field+": "+c.Message)
				} else {
					out = append(out, c.Message)
				}
			}
			return out
		}
		if m := st.Status().Message; m != "" {
			return []string{m}
		}
	}
	return []string{err.Error()}
}

func nonNil(fe []FieldError) []FieldError {
	if fe == nil {
		return []FieldError{}
	}
	return fe
}
