// Package embedding calls an embedding provider: an OpenAI-compatible
// POST {url}/embeddings, which Ollama, llama.cpp's server, vLLM,
// text-embeddings-inference and the hosted APIs all serve.
//
// Every call runs under the AiProviderInvocation pipeline keyed by
// Instance, and that pipeline is the only retry layer: the HTTP client
// here retries nothing. The answer is classified before the pipeline sees
// it: 408, 429 and 5xx are repeatable (a Retry-After is honoured within
// the budget), every other status is terminal, a response that never
// arrived is repeatable, and an answer of the wrong shape — a vector of
// the wrong length, one vector too many or too few — is a named terminal
// failure.
//
// An answer names the model it was computed with (OpenAI, Ollama, vLLM
// and text-embeddings-inference name one; llama.cpp's server may not), and
// Embed returns that name with the vectors, so the caller can keep vectors
// of two models apart; answers of one call naming two models fail it
// (EmbeddingModelChanged).
//
// The API key is resolved from its secret reference for each call and
// sent as a bearer token. It never appears in an error, a log line or a
// metric; an error never carries the provider's response body either,
// since providers echo parts of a refused key in it.
package embedding

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/secret"
)

// Instance is the pipeline instance every embedding call runs under: the
// one configured provider. It labels metrics and log lines, so it is a
// fixed name and never the provider's URL.
const Instance = "embedding"

// OperationEmbed is the operation name of an embedding call.
const OperationEmbed = "embed"

// MaxInputsPerRequest bounds the texts one request carries; a caller with
// more splits them (Client.Embed does).
const MaxInputsPerRequest = 64

// maxAnswerBytes bounds the answer read from the provider: 64 vectors of
// 8192 dimensions as JSON numbers fit well inside it.
const maxAnswerBytes = 64 << 20

// maxModelBytes bounds the model name an answer may carry: it is recorded
// with the profile and named in failures, and configured names are at most
// 200 characters.
const maxModelBytes = 256

// Profile identifies the vectors a provider answers with: vectors of two
// profiles are never compared.
type Profile struct {
	Model      string
	Dimensions int
}

// Options configure a Client.
type Options struct {
	// URL is the provider's base URL; requests go to URL + "/embeddings".
	// Required.
	URL string
	// Profile is the model requested and the dimensions every vector must
	// have. Required.
	Profile Profile
	// APIKey, when set, references the bearer token. Optional.
	APIKey secret.Reference
	// Resolver resolves APIKey. Default: a zero secret.Resolver.
	Resolver *secret.Resolver
	// Registry runs every call under AiProviderInvocation. Required.
	Registry *resilience.Registry
	// HTTPClient sends the requests. Default: a client with no timeout of
	// its own (the pipeline's attempt timeout bounds a call) and no retry.
	HTTPClient *http.Client
	// Metrics records each request's duration. Optional.
	Metrics *Metrics
}

// Client embeds texts with one provider and profile. It is safe for
// concurrent use.
type Client struct {
	opts Options
}

// NewClient returns a Client, or an error naming what Options lack.
func NewClient(opts Options) (*Client, error) {
	if opts.URL == "" || opts.Profile.Model == "" || opts.Profile.Dimensions <= 0 || opts.Registry == nil {
		return nil, errors.New("embedding: a URL, a model, the dimensions and a resilience registry are required")
	}
	opts.Resolver = cmp.Or(opts.Resolver, &secret.Resolver{})
	opts.HTTPClient = cmp.Or(opts.HTTPClient, &http.Client{})
	return &Client{opts: opts}, nil
}

// Profile returns the client's profile.
func (c *Client) Profile() Profile { return c.opts.Profile }

// Embed returns one unit-length vector per text, in order, each of the
// profile's dimensions, and the model the provider's answers name ("" when
// none names one: llama.cpp's server may leave it out). Texts are sent in
// requests of at most MaxInputsPerRequest, one after another (each under
// the pipeline: the class's concurrency limit rejects rather than queues,
// so fanning out would turn a healthy provider's bulkhead into failures).
// Answers of one call that name two different models (SameModel) fail it
// with a *ModelChangedError. Whether the model is the one the profile's
// vectors were computed with is the caller's to decide: the client knows
// no profile's record.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, string, error) {
	out := make([][]float32, 0, len(texts))
	var model string
	for len(texts) > 0 {
		n := min(len(texts), MaxInputsPerRequest)
		a, err := c.request(ctx, texts[:n])
		if err != nil {
			return nil, "", err
		}
		if model, err = sameAnswer(model, a.model); err != nil {
			return nil, "", err
		}
		out = append(out, a.vectors...)
		texts = texts[n:]
	}
	return out, model, nil
}

// answered is one request's answer: its vectors and the model it names.
type answered struct {
	vectors [][]float32
	model   string
}

// sameAnswer returns the model a call's answers name so far, given what
// the earlier ones named (model) and the next one (next), or a
// *ModelChangedError when the two differ (SameModel).
func sameAnswer(model, next string) (string, error) {
	switch {
	case model == "":
		return next, nil
	case next != "" && !SameModel(model, next):
		return "", &ModelChangedError{Recorded: model, Answered: next}
	}
	return model, nil
}

// request sends texts, at most MaxInputsPerRequest, in one request under
// the pipeline.
func (c *Client) request(ctx context.Context, texts []string) (answered, error) {
	key := resilience.Key{Class: resilience.AiProviderInvocation, Instance: Instance}
	return resilience.Get(ctx, c.opts.Registry, key, OperationEmbed, func(ctx context.Context) (answered, error) {
		start := time.Now()
		vs, model, err := c.call(ctx, texts)
		c.opts.Metrics.request(time.Since(start), err)
		return answered{vectors: vs, model: model}, err
	})
}

type request struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

type answer struct {
	// Model is the model the provider says it embedded with; OpenAI,
	// Ollama, vLLM and text-embeddings-inference name one.
	Model string `json:"model"`
	Data  []struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
}

// call makes one attempt, and returns the vectors and the model the
// answer names.
func (c *Client) call(ctx context.Context, texts []string) ([][]float32, string, error) {
	body, err := json.Marshal(request{Model: c.opts.Profile.Model, Input: texts, EncodingFormat: "float"})
	if err != nil {
		return nil, "", fmt.Errorf("embedding: encode the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.URL+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, "", &AnswerError{Name: FailureRequestRefused, Reason: "the provider URL does not make a request"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if !c.opts.APIKey.IsZero() {
		key, err := c.opts.Resolver.Resolve(ctx, c.opts.APIKey)
		if err != nil {
			return nil, "", fmt.Errorf("embedding: resolve the API key: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+string(key))
		clear(key)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, "", &TransportError{Err: unwrapURL(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil, "", &StatusError{Status: resp.StatusCode, retryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
	var a answer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswerBytes)).Decode(&a); err != nil {
		if resilience.ConnectionLost(err) {
			return nil, "", &TransportError{Err: err}
		}
		return nil, "", &AnswerError{Name: FailureAnswerMalformed, Reason: "the answer is not an embeddings list"}
	}
	if len(a.Model) > maxModelBytes {
		return nil, "", &AnswerError{Name: FailureAnswerMalformed, Reason: fmt.Sprintf("the answer names a model of more than %d bytes", maxModelBytes)}
	}
	if len(a.Data) != len(texts) {
		return nil, "", &AnswerError{Name: FailureCountMismatch,
			Reason: fmt.Sprintf("the provider answered %d vectors for %d texts", len(a.Data), len(texts))}
	}
	out := make([][]float32, len(texts))
	for _, d := range a.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, "", &AnswerError{Name: FailureAnswerMalformed, Reason: "the answer's indexes do not match the texts"}
		}
		if len(d.Embedding) != c.opts.Profile.Dimensions {
			return nil, "", &AnswerError{Name: FailureDimensionMismatch,
				Reason: fmt.Sprintf("the provider answered a vector of %d dimensions; the profile has %d", len(d.Embedding), c.opts.Profile.Dimensions)}
		}
		out[d.Index] = Normalize(d.Embedding)
	}
	return out, a.Model, nil
}

// Normalize returns v scaled to unit length as float32 (all zero when v
// is), so a dot product of two stored vectors is their cosine.
func Normalize(v []float64) []float32 {
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	out := make([]float32, len(v))
	if norm == 0 || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return out
	}
	norm = math.Sqrt(norm)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3); 0 for none or an unreadable one.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// unwrapURL drops the *url.Error wrapper, whose text repeats the method
// and URL, and keeps what failed.
func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}
