package config

import "strings"

// Persistence is the deployment-wide persistence section, from
// MAILFATHOM_PERSISTENCE_<NAME>.
type Persistence struct {
	// MaximumConcurrencyCommitAttempts is
	// MAILFATHOM_PERSISTENCE_MAXIMUM_CONCURRENCY_COMMIT_ATTEMPTS, how many
	// times a write that lost an optimistic-concurrency race is attempted,
	// 1 to 10. Default 2.
	MaximumConcurrencyCommitAttempts int
	// TextSearchConfiguration is
	// MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION, the PostgreSQL text
	// search configuration compiled into the search vector's generated
	// column; one of TextSearchConfigurations, matched case-sensitively.
	// Default simple. Changing it requires recreating the search documents.
	TextSearchConfiguration string
}

// TextSearchConfigurations lists the text search configurations a stock
// PostgreSQL 15 server ships.
var TextSearchConfigurations = []string{
	"simple", "arabic", "armenian", "basque", "catalan", "danish", "dutch",
	"english", "finnish", "french", "german", "greek", "hindi", "hungarian",
	"indonesian", "irish", "italian", "lithuanian", "nepali", "norwegian",
	"portuguese", "romanian", "russian", "serbian", "spanish", "swedish",
	"tamil", "turkish", "yiddish",
}

type rawPersistence struct {
	MaximumConcurrencyCommitAttempts string `env:"MAXIMUM_CONCURRENCY_COMMIT_ATTEMPTS" envDefault:"2"`
	TextSearchConfiguration          string `env:"TEXT_SEARCH_CONFIGURATION" envDefault:"simple"`
}

func convertPersistence(c *converter, raw rawPersistence) Persistence {
	const p = Prefix + "PERSISTENCE_"
	out := Persistence{
		MaximumConcurrencyCommitAttempts: c.integer(p+"MAXIMUM_CONCURRENCY_COMMIT_ATTEMPTS", raw.MaximumConcurrencyCommitAttempts, 1, 10),
	}
	for _, name := range TextSearchConfigurations {
		if raw.TextSearchConfiguration == name {
			out.TextSearchConfiguration = name
			return out
		}
	}
	msg := "must be a text search configuration stock PostgreSQL ships, matched case-sensitively: " + strings.Join(TextSearchConfigurations, ", ")
	for _, name := range TextSearchConfigurations {
		if strings.EqualFold(raw.TextSearchConfiguration, name) {
			msg += "; did you mean " + name + "?"
		}
	}
	c.add(p+"TEXT_SEARCH_CONFIGURATION", "%s", msg)
	return out
}
