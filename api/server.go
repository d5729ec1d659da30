package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Route is an HTTP route another package contributes.
type Route struct {
	Method  string // GET, POST, … ("" for any)
	Pattern string // net/http ServeMux pattern path, e.g. /v1/approvals/{id}
	Handler http.Handler
	// Auth requires the bearer key. Inbound provider webhooks and approval
	// pages carry their own proof and set it false.
	Auth bool
}

// Config configures the server.
type Config struct {
	// APIKeys are the accepted bearer keys; at least one is required.
	APIKeys []string
	// ReadKeys are bearer keys that may only read: GET and HEAD pass, any
	// other method is refused 403.
	ReadKeys []string
	// MaxBodyBytes bounds request bodies; default 8 MiB + 64 KiB.
	MaxBodyBytes int64
	// Ready reports readiness for /readyz; nil means always ready.
	Ready func() error
	// ReadyDetails, when set, adds its fields to the /readyz answer (the
	// singletons this replica holds).
	ReadyDetails func() map[string]any
	Now          func() time.Time
	// MetricsRequireKey makes /metrics need a bearer key (its series name
	// endpoints and approval outcomes); false serves it to anyone.
	MetricsRequireKey bool
}

// Server is the HTTP API.
type Server struct {
	cfg      Config
	keys     [][32]byte
	readKeys [][32]byte
	db       store.Deliveries
	ingest   *Ingester
	log      *slog.Logger
	metrics  *Metrics
	gatherer prometheus.Gatherer
	mux      *http.ServeMux
}

// New builds the server and its routes.
func New(cfg Config, db store.Deliveries, ingest *Ingester, metrics *Metrics, gatherer prometheus.Gatherer, log *slog.Logger, extra []Route) (*Server, error) {
	if len(cfg.APIKeys) == 0 {
		return nil, errors.New("api: at least one API key is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 8<<20 + 64<<10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, db: db, ingest: ingest, log: log, metrics: metrics, gatherer: gatherer, mux: http.NewServeMux()}
	for _, k := range cfg.APIKeys {
		if k == "" {
			return nil, errors.New("api: an API key is empty")
		}
		s.keys = append(s.keys, sha256.Sum256([]byte(k)))
	}
	for _, k := range cfg.ReadKeys {
		if k == "" {
			return nil, errors.New("api: a read-only API key is empty")
		}
		s.readKeys = append(s.readKeys, sha256.Sum256([]byte(k)))
	}
	routes := []Route{
		{"POST", "/v1/deliveries", http.HandlerFunc(s.postDeliveries), true},
		{"GET", "/v1/deliveries", http.HandlerFunc(s.listDeliveries), true},
		{"GET", "/v1/deliveries/{id}", http.HandlerFunc(s.getDelivery), true},
		{"POST", "/v1/deliveries/{id}/retry", http.HandlerFunc(s.retryDelivery), true},
		{"GET", "/v1/deliveries/stats", http.HandlerFunc(s.deliveryStats), true},
		{"POST", "/v1/deliveries/retry", http.HandlerFunc(s.bulkRetry), true},
		{"GET", "/healthz", http.HandlerFunc(s.healthz), false},
		{"GET", "/readyz", http.HandlerFunc(s.readyz), false},
	}
	if gatherer != nil {
		routes = append(routes, Route{"GET", "/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}), cfg.MetricsRequireKey})
	}
	for _, r := range append(routes, extra...) {
		if err := s.handle(r); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Server) handle(r Route) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("api: route %s %s: %v", r.Method, r.Pattern, p)
		}
	}()
	h := r.Handler
	if r.Auth {
		h = s.requireKey(h)
	}
	pattern := r.Pattern
	if r.Method != "" {
		pattern = r.Method + " " + r.Pattern
	}
	s.mux.Handle(pattern, h)
	return nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panicked", "path", r.URL.Path, "panic", p)
			WriteError(w, nil, fmt.Errorf("panic"))
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// keyRole checks the request's bearer key against every configured key
// without stopping early, so the time taken says nothing about which key
// matched: full is 1 for a full-access key, read 1 for a read-only one.
func (s *Server) keyRole(r *http.Request) (full, read int) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return 0, 0
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	for _, k := range s.keys {
		full |= subtle.ConstantTimeCompare(h[:], k[:])
	}
	for _, k := range s.readKeys {
		read |= subtle.ConstantTimeCompare(h[:], k[:])
	}
	return full, read
}

// requireKey lets through requests with a configured bearer key. A
// read-only key may GET and HEAD only.
func (s *Server) requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		match, read := s.keyRole(r)
		switch {
		case match == 1:
		case read == 1 && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		case read == 1:
			WriteError(w, s.log, ErrReadOnly)
			return
		default:
			WriteError(w, s.log, ErrUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) postDeliveries(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	if !jsonBody(r.Header) {
		WriteError(w, s.log, ErrUnsupportedMediaType)
		return
	}
	body, err := envelope.ReadLimitedSize(r.Body, s.cfg.MaxBodyBytes, r.ContentLength)
	if err != nil {
		var tl *envelope.TooLargeError
		if errors.As(err, &tl) {
			// The body's bound leaves room around the envelope; the limit
			// a caller can act on is the envelope's, as configured.
			WriteError(w, s.log, &envelope.TooLargeError{Limit: s.ingest.MaxEnvelopeBytes()})
			return
		}
		WriteError(w, s.log, &envelope.ValidationError{Problems: []envelope.Problem{{Reason: "could not read the body: " + err.Error()}}})
		return
	}
	acc, replayed, err := s.ingest.Accept(r.Context(), body, r.Header.Get("Idempotency-Key"), "api")
	if err != nil {
		if s.metrics != nil {
			s.metrics.rejected.Inc()
		}
		WriteError(w, s.log, err)
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if s.metrics != nil {
		s.metrics.ingestSeconds.Observe(since(start, s.cfg.Now()))
	}
	WriteJSON(w, http.StatusAccepted, acc)
}

func (s *Server) getDelivery(w http.ResponseWriter, r *http.Request) {
	v, err := LookupDelivery(r.Context(), s.db, r.PathValue("id"))
	if err != nil {
		WriteError(w, s.log, err)
		return
	}
	WriteJSON(w, http.StatusOK, v)
}

// LookupDelivery is what GET /v1/deliveries/{id} answers: for a delivery
// id (dlv_…) its DeliveryView, for an envelope id its EnvelopeView with
// every delivery. An unknown id matches store.ErrNotFound.
func LookupDelivery(ctx context.Context, db store.Deliveries, id string) (any, error) {
	view := func(d *store.Delivery) (DeliveryView, error) {
		atts, err := db.Attempts(ctx, d.ID)
		if err != nil {
			return DeliveryView{}, err
		}
		return deliveryViewOf(d, atts), nil
	}
	if strings.HasPrefix(id, "dlv_") {
		d, err := db.Delivery(ctx, id)
		if err != nil {
			return nil, err
		}
		return view(d)
	}
	rec, err := db.Envelope(ctx, id)
	if err != nil {
		return nil, err
	}
	out := envelopeView(rec)
	for _, did := range rec.DeliveryIDs {
		d, err := db.Delivery(ctx, did)
		if err != nil {
			return nil, err
		}
		v, err := view(d)
		if err != nil {
			return nil, err
		}
		out.Deliveries = append(out.Deliveries, v)
	}
	return out, nil
}

func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if filtered(q) {
		s.queryDeliveries(w, r)
		return
	}
	st := store.State(q.Get("state"))
	if st != "" && !st.Valid() {
		WriteError(w, s.log, &envelope.ValidationError{Problems: []envelope.Problem{{Path: "state", Reason: fmt.Sprintf("unknown state %q: one of queued, sending, sent, retrying, dead", st)}}})
		return
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			WriteError(w, s.log, &envelope.ValidationError{Problems: []envelope.Problem{{Path: "limit", Reason: "must be an integer from 1 to 1000"}}})
			return
		}
		limit = n
	}
	ds, err := s.db.ListDeliveries(r.Context(), st, q.Get("after"), limit)
	if err != nil {
		WriteError(w, s.log, err)
		return
	}
	out := map[string]any{"deliveries": deliveryItems(ds)}
	if len(ds) == limit {
		out["next"] = ds[len(ds)-1].ID
	}
	WriteJSON(w, http.StatusOK, out)
}

func (s *Server) retryDelivery(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx := r.Context()
	var ids []string
	if strings.HasPrefix(id, "dlv_") {
		ids = []string{id}
	} else {
		rec, err := s.db.Envelope(ctx, id)
		if err != nil {
			WriteError(w, s.log, err)
			return
		}
		for _, did := range rec.DeliveryIDs {
			if d, err := s.db.Delivery(ctx, did); err == nil && d.State == store.StateDead {
				ids = append(ids, did)
			}
		}
		if len(ids) == 0 {
			WriteError(w, s.log, fmt.Errorf("%w: the envelope has no dead deliveries", store.ErrBadState))
			return
		}
	}
	var out []*store.Delivery
	for _, did := range ids {
		d, err := s.db.Retry(ctx, did)
		if err != nil {
			WriteError(w, s.log, err)
			return
		}
		out = append(out, d)
	}
	s.ingest.notify()
	WriteJSON(w, http.StatusOK, map[string]any{"deliveries": deliveryItems(out)})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 "ready" or 503 "not ready" to anyone (a load balancer
// has no key). What a process is made of — its holder id (host name and
// pid), the singletons it holds (mailbox accounts among them), the store,
// and the part still starting — is told only to a caller with an API key.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	full, read := s.keyRole(r)
	details := full|read == 1
	body := map[string]any{}
	if details && s.cfg.ReadyDetails != nil {
		for k, v := range s.cfg.ReadyDetails() {
			body[k] = v
		}
	}
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			body["status"] = "not ready"
			if details {
				body["reason"] = err.Error()
			}
			WriteJSON(w, http.StatusServiceUnavailable, body)
			return
		}
	}
	body["status"] = "ready"
	WriteJSON(w, http.StatusOK, body)
}

// jsonBody reports whether a request declares a JSON body (RFC 9110 §8.3):
// application/json, any case, with parameters, a charset only if UTF-8
// (RFC 8259 §8.1); and no Content-Encoding (§8.4). A request without a
// Content-Type is read as JSON: RFC 9110 lets a recipient examine the data,
// and the body must parse as JSON anyway.
func jsonBody(h http.Header) bool {
	if ce := h.Get("Content-Encoding"); ce != "" && !strings.EqualFold(strings.TrimSpace(ce), "identity") {
		return false
	}
	ct := h.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}
