// Package embedtest is test infrastructure: a local HTTP server speaking
// the OpenAI-compatible embeddings protocol (POST /embeddings) with a
// deterministic embedding function, so tests can embed and search mail
// without a model. It is never a provider MailFathom offers.
//
// The embedding is feature hashing: every lower-cased word and every
// character trigram of the input (padded with a space at each end of a
// word) is hashed to one of Dimensions coordinates with a hashed sign, and
// the sum is normalised to unit length. Texts that share words or parts of
// words therefore get vectors with a positive cosine; unrelated texts get
// vectors near orthogonal. That is enough to rank by shared vocabulary,
// and nothing like meaning.
//
//	srv := embedtest.Start(t, embedtest.Options{Dimensions: 64})
//	// configure MAILFATHOM_EMBEDDING_PROVIDER_URL=srv.URL ...
//	srv.SetFault(embedtest.Fault{Kind: embedtest.TooManyRequests, RetryAfter: time.Second})
//
// An answer names the model the request named, as Ollama and vLLM answer;
// Options.AnsweredModel (or SetAnsweredModel, from the next request on)
// names another, as a provider serving something else under the name
// would, and Options.OmitModel names none, as some llama.cpp servers do.
//
// Faults: TooManyRequests (429 with Retry-After), ServerError (500), Hang
// (the answer never comes, until the request is cancelled or the server
// closes), WrongDimension (vectors one coordinate short) and WrongCount
// (one vector fewer than inputs), and Unauthorized (401) for a terminal
// refusal of every request. A Refusal refuses, with a chosen status, every
// request carrying an input that contains its marker, as a provider
// refuses a whole request for one input it will not embed:
//
//	srv.SetRefusal(embedtest.Refusal{Marker: "UNEMBEDDABLE", Status: 413})
package embedtest

import (
	"cmp"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// FaultKind is how the server misbehaves.
type FaultKind int

// The faults the server can answer with.
const (
	Healthy FaultKind = iota
	TooManyRequests
	ServerError
	Hang
	WrongDimension
	WrongCount
	Unauthorized
)

// Fault is the server's current behaviour. The zero value is healthy.
type Fault struct {
	Kind FaultKind
	// RetryAfter is the Retry-After a TooManyRequests answer carries, in
	// whole seconds (0 sends none).
	RetryAfter time.Duration
	// Times, when positive, is how many requests get the fault; the
	// server is healthy again after them. 0 keeps it until changed.
	Times int
}

// Refusal makes the server refuse, with Status, every request with an
// input containing Marker. The zero value refuses nothing. A fault is
// answered before a refusal is considered.
type Refusal struct {
	Marker string
	// Status is the answer's status: 400, 413 or 422 refuse the input.
	Status int
}

// Options configure a server.
type Options struct {
	// Dimensions is the length of every vector. Default 64.
	Dimensions int
	// APIKey, when set, is the bearer token every request must carry; a
	// request without it is answered 401.
	APIKey string
	// Latency is added before every healthy answer. Default none.
	Latency time.Duration
	// AnsweredModel is the model every answer names. Default: the model
	// the request names.
	AnsweredModel string
	// OmitModel leaves the model out of every answer. Default false.
	OmitModel bool
}

// Server is a running test provider.
type Server struct {
	// URL is the base URL to configure: requests go to URL + "/embeddings".
	URL string

	opts   Options
	srv    *httptest.Server
	closed chan struct{}

	mu       sync.Mutex
	fault    Fault
	answered string
	refusal  Refusal
	refused  int
	requests int
	inputs   int
	models   map[string]int
}

// Start runs a server on 127.0.0.1 that closes in t's cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Dimensions <= 0 {
		opts.Dimensions = 64
	}
	s := &Server{opts: opts, closed: make(chan struct{}), models: map[string]int{}, answered: opts.AnsweredModel}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close stops the server; a hanging request is released first.
func (s *Server) Close() {
	select {
	case <-s.closed:
		return
	default:
	}
	close(s.closed)
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// SetFault changes how the server answers from the next request on.
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// SetAnsweredModel changes the model answers name from the next request
// on; "" names the request's model again.
func (s *Server) SetAnsweredModel(model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answered = model
}

// SetRefusal changes which inputs the server refuses from the next
// request on.
func (s *Server) SetRefusal(r Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusal = r
}

// Refused is how many requests a Refusal refused.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Requests is how many requests reached /embeddings, answered or not.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Inputs is how many texts healthy answers embedded.
func (s *Server) Inputs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inputs
}

// Model returns how many requests named model.
func (s *Server) Model(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.models[model]
}

type request struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
}

type datum struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

type response struct {
	Object string  `json:"object"`
	Data   []datum `json:"data"`
	Model  string  `json:"model,omitempty"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/embeddings" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.requests++
	fault, answered, refusal := s.fault, s.answered, s.refusal
	if s.fault.Times > 0 {
		if s.fault.Times--; s.fault.Times == 0 {
			s.fault = Fault{}
		}
	}
	s.mu.Unlock()
	if s.opts.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey {
		http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
		return
	}
	switch fault.Kind {
	case TooManyRequests:
		if fault.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(fault.RetryAfter.Seconds()))))
		}
		http.Error(w, `{"error":{"message":"rate limited"}}`, http.StatusTooManyRequests)
		return
	case ServerError:
		http.Error(w, `{"error":{"message":"internal"}}`, http.StatusInternalServerError)
		return
	case Unauthorized:
		http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
		return
	case Hang:
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
		return
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"malformed request"}}`, http.StatusBadRequest)
		return
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			http.Error(w, `{"error":{"message":"input must be a string or an array of strings"}}`, http.StatusBadRequest)
			return
		}
		inputs = []string{one}
	}
	if refusal.Marker != "" {
		for _, in := range inputs {
			if strings.Contains(in, refusal.Marker) {
				s.mu.Lock()
				s.refused++
				s.mu.Unlock()
				http.Error(w, `{"error":{"message":"input refused"}}`, refusal.Status)
				return
			}
		}
	}
	if s.opts.Latency > 0 {
		select {
		case <-time.After(s.opts.Latency):
		case <-r.Context().Done():
			return
		}
	}
	dims := s.opts.Dimensions
	if fault.Kind == WrongDimension {
		dims--
	}
	resp := response{Object: "list", Model: cmp.Or(answered, req.Model)}
	if s.opts.OmitModel {
		resp.Model = ""
	}
	for i, in := range inputs {
		if fault.Kind == WrongCount && i == len(inputs)-1 {
			break
		}
		resp.Data = append(resp.Data, datum{Object: "embedding", Index: i, Embedding: Embed(in, dims)})
	}
	s.mu.Lock()
	s.inputs += len(resp.Data)
	s.models[req.Model]++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// Embed is the server's embedding of text in dims dimensions: hashed word
// and character-trigram features, normalised to unit length (all zero for
// a text with no letter or digit).
func Embed(text string, dims int) []float32 {
	v := make([]float64, dims)
	add := func(feature string, weight float64) {
		h := fnv.New64a()
		_, _ = h.Write([]byte(feature))
		x := h.Sum64()
		sign := 1.0
		if x&(1<<63) != 0 {
			sign = -1
		}
		v[int(x%uint64(dims))] += sign * weight
	}
	for _, word := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		add("w:"+word, 2)
		padded := []rune(" " + word + " ")
		for i := 0; i+3 <= len(padded); i++ {
			add("t:"+string(padded[i:i+3]), 1)
		}
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	out := make([]float32, dims)
	if norm == 0 {
		return out
	}
	norm = math.Sqrt(norm)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}
