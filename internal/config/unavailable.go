package config

import (
	"maps"
	"slices"
	"strings"
)

// RuleFeatureNotAvailable is the identity of a setting refused because the
// feature it configures does not exist in this version. Accepting it would
// let an operator believe they configured something that does nothing.
const RuleFeatureNotAvailable = "FeatureNotAvailable"

// unavailableFeature is a feature whose settings are refused, and the
// variables (or variable prefixes, ending in "_") that configure it.
type unavailableFeature struct {
	name      string
	verb      string
	variables []string
}

// featureNeeds maps a feature that exists but needs another variable set
// to that variable: the feature's settings are refused only without it,
// and the refusal names it.
var featureNeeds = map[string]string{
	"embedding": Prefix + "EMBEDDING_PROVIDER_URL",
}

// unavailableFeatures are the features this version does not have, or
// does not have without the variable they need.
var unavailableFeatures = []unavailableFeature{
	// Embedding exists, but without a profile there is no embedding work
	// for these to configure.
	{"embedding", "is", []string{
		Prefix + "QUEUE_EMBEDDINGS_WORKERS",
		resilienceSectionPrefix + "AI_PROVIDER_INVOCATION_",
	}},
}

// refuseUnavailable reports every set variable of a feature this version
// does not have.
//
// A refused variable gets that one problem: whatever else its value got
// wrong is beside the point.
func refuseUnavailable(c *converter) {
	refused := map[string]bool{}
	for _, p := range c.problems {
		if p.Rule == RuleFeatureNotAvailable {
			refused[p.Variable] = true
		}
	}
	set := slices.Sorted(maps.Keys(c.set))
	for _, f := range unavailableFeatures {
		needs := featureNeeds[f.name]
		if needs != "" && c.isSet(needs) {
			continue
		}
		for _, name := range f.variables {
			for _, variable := range set {
				if variable == name || (strings.HasSuffix(name, "_") && strings.HasPrefix(variable, name)) {
					refused[variable] = true
					c.problems = slices.DeleteFunc(c.problems, func(p Problem) bool { return p.Variable == variable })
					if needs != "" {
						c.addRule(variable, RuleFeatureNotAvailable, "%s %s not configured: it needs %s; set it or remove this variable", f.name, f.verb, needs)
						continue
					}
					c.addRule(variable, RuleFeatureNotAvailable, "%s %s not available in this version of MailFathom; remove the variable", f.name, f.verb)
				}
			}
		}
	}
}
