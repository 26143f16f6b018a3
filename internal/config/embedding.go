package config

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// Embedding is the embedding profile, from MAILFATHOM_EMBEDDING_<NAME>: the
// provider messages' passages are embedded by, and how much work is
// offered to it. A profile is configured exactly when ProviderURL is set;
// without one no message is offered for embedding and semantic search is
// not available.
//
// The model and the dimensions are the profile's identity: vectors
// computed under one profile are never compared with another's, so
// changing either embeds every message again (the earlier vectors are
// kept until they are removed with their messages).
type Embedding struct {
	// ProviderURL is MAILFATHOM_EMBEDDING_PROVIDER_URL, an http or https
	// base URL of an OpenAI-compatible API: requests go to
	// ProviderURL + "/embeddings". No default: unset means no profile. It
	// must not carry credentials, a query or a fragment; the API key is a
	// secret reference of its own.
	ProviderURL string
	// Model is MAILFATHOM_EMBEDDING_MODEL, the model name sent with every
	// request. Required with a provider; at most 200 characters.
	Model string
	// Dimensions is MAILFATHOM_EMBEDDING_DIMENSIONS, the length of every
	// vector the model returns, 1 to 8192. Required with a provider. It is
	// checked against every answer and not sent: a provider that ignores
	// a requested size would otherwise go unnoticed.
	Dimensions int
	// APIKey is MAILFATHOM_EMBEDDING_API_KEY, a secret reference to the
	// bearer token sent to the provider. Optional (a local server needs
	// none).
	APIKey secret.Reference
	// BatchSize is MAILFATHOM_EMBEDDING_BATCH_SIZE, the most messages one
	// embed job carries (and embeds in one provider request per 64
	// passages), 1 to 256. Default 16.
	BatchSize int
	// MaxBacklog is MAILFATHOM_EMBEDDING_MAX_BACKLOG, the most embed jobs
	// waiting to run before an offer is refused, 1 to 100 000. Default
	// 1000. A refused offer is completed later by the embedding backfill.
	MaxBacklog int
}

// Configured reports whether an embedding profile is configured.
func (e Embedding) Configured() bool { return e.ProviderURL != "" }

type rawEmbedding struct {
	ProviderURL string `env:"PROVIDER_URL"`
	Model       string `env:"MODEL"`
	Dimensions  string `env:"DIMENSIONS"`
	APIKey      string `env:"API_KEY"`
	BatchSize   string `env:"BATCH_SIZE" envDefault:"16"`
	MaxBacklog  string `env:"MAX_BACKLOG" envDefault:"1000"`
}

// embeddingProfileVariables are the variables that configure a profile
// beside its provider URL: setting one without the URL configures nothing.
var embeddingProfileVariables = []string{"MODEL", "DIMENSIONS", "API_KEY", "BATCH_SIZE", "MAX_BACKLOG"}

func convertEmbedding(c *converter, raw rawEmbedding) Embedding {
	const p = Prefix + "EMBEDDING_"
	e := Embedding{
		BatchSize:  c.integer(p+"BATCH_SIZE", raw.BatchSize, 1, 256),
		MaxBacklog: c.integer(p+"MAX_BACKLOG", raw.MaxBacklog, 1, 100_000),
		APIKey:     c.reference(p+"API_KEY", raw.APIKey),
	}
	if raw.ProviderURL == "" {
		for _, name := range embeddingProfileVariables {
			if c.isSet(p + name) {
				c.add(p+name, "configures an embedding profile, which needs MAILFATHOM_EMBEDDING_PROVIDER_URL; set it or remove this variable")
			}
		}
		return e
	}
	u, err := url.Parse(raw.ProviderURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		c.add(p+"PROVIDER_URL", "must be an absolute http or https URL, such as http://127.0.0.1:11434/v1")
	case u.User != nil:
		c.add(p+"PROVIDER_URL", "must not carry credentials; set MAILFATHOM_EMBEDDING_API_KEY to a secret reference instead")
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw.ProviderURL, "?") || strings.HasSuffix(raw.ProviderURL, "#"):
		c.add(p+"PROVIDER_URL", "must not carry a query or a fragment: it is the base URL /embeddings is appended to")
	default:
		e.ProviderURL = strings.TrimRight(raw.ProviderURL, "/")
	}
	switch {
	case raw.Model == "":
		c.add(p+"MODEL", "is required with MAILFATHOM_EMBEDDING_PROVIDER_URL: the model name the provider serves")
	case utf8.RuneCountInString(raw.Model) > 200 || hasControl(raw.Model):
		c.add(p+"MODEL", "must be at most 200 characters without control characters")
	default:
		e.Model = raw.Model
	}
	if raw.Dimensions == "" {
		c.add(p+"DIMENSIONS", "is required with MAILFATHOM_EMBEDDING_PROVIDER_URL: the length of the model's vectors, such as 384 or 768")
	} else {
		e.Dimensions = c.integer(p+"DIMENSIONS", raw.Dimensions, 1, 8192)
	}
	return e
}
