package config

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Strictness: caarlos0/env has no strict mode, so Load records every key the
// binding reads (env.Options.OnSet is called for each field key, set or not)
// and reports every other MAILFATHOM_ variable. The library also stops
// silently at the first gap in a slice's indexes, so a variable of an index
// past the gap is never read; those are reported as gaps rather than as
// unknown names.

var (
	accountIndexPattern = regexp.MustCompile(`^MAILFATHOM_ACCOUNTS_([0-9]+)_(.*)$`)
	folderIndexPattern  = regexp.MustCompile(`^FOLDERS_([0-9]+)_`)
	digitRuns           = regexp.MustCompile(`[0-9]+`)
)

// Variable is one variable the configuration reads, in template form:
// account and folder indexes appear as <i> and <j>.
type Variable struct {
	// Name is the variable's name, such as MAILFATHOM_SYNC_INTERVAL or
	// MAILFATHOM_ACCOUNTS_<i>_FOLDERS_<j>_ALIAS.
	Name string
	// Default is the value used when the variable is unset or blank, or ""
	// when there is none or it is derived.
	Default string
}

var (
	variablesOnce sync.Once
	variables     []Variable
)

// Variables lists every variable the configuration reads, in binding order.
// It is derived from the binding itself, by binding an environment with one
// account and one folder, so it cannot drift from what Load reads.
func Variables() []Variable {
	variablesOnce.Do(func() {
		var out []Variable
		seen := map[string]bool{}
		record := func(key string, value any, isDefault bool) {
			name := strings.Replace(key, "ACCOUNTS_0_", "ACCOUNTS_<i>_", 1)
			name = strings.Replace(name, "FOLDERS_0_", "FOLDERS_<j>_", 1)
			if seen[name] {
				return
			}
			seen[name] = true
			v := Variable{Name: name}
			if s, ok := value.(string); ok && isDefault {
				v.Default = s
			}
			if d, ok := resilienceDefault(name); ok {
				v.Default = d
			}
			out = append(out, v)
		}
		_, err := bindRaw(map[string]string{
			Prefix + "ACCOUNTS_0_ID":              "x",
			Prefix + "ACCOUNTS_0_FOLDERS_0_ALIAS": "x",
		}, record)
		if err != nil {
			panic("config: binding the variable list: " + err.Error())
		}
		variables = out
	})
	return variables
}

// unknownVariables reports every MAILFATHOM_ variable the binding did not
// read, sorted by name, and every variable that carries the prefix in
// another case.
func unknownVariables(vars map[string]string, caseMismatches []string, read map[string]bool, raw rawConfig) []Problem {
	var names []string
	for k := range vars {
		if !read[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)

	var problems []Problem
	for _, k := range names {
		problems = append(problems, Problem{Variable: k, Message: explainUnknown(k, raw)})
	}
	for _, k := range caseMismatches {
		msg := "is not a MailFathom variable: names are case-sensitive and start with " + Prefix
		if s := suggest(strings.ToUpper(k)); s != "" {
			msg += "; did you mean " + s + "?"
		}
		problems = append(problems, Problem{Variable: k, Message: msg})
	}
	return problems
}

// explainUnknown says why k was not read: a gap in account or folder
// indexes, a non-canonical index, or an unknown name, with a suggestion for
// a near miss.
func explainUnknown(k string, raw rawConfig) string {
	if m := accountIndexPattern.FindStringSubmatch(k); m != nil {
		i, ok := canonicalIndex(m[1])
		switch {
		case !ok:
			return fmt.Sprintf("account index %s is not written as a plain number: indexes are 0, 1, 2, … without leading zeros", m[1])
		case i >= len(raw.Accounts):
			return fmt.Sprintf("account index %d follows a gap: indexes must be 0, 1, 2, … without gaps, and no %sACCOUNTS_%d_* variable is set, so account %d and every later one are not read", i, Prefix, len(raw.Accounts), i)
		}
		if fm := folderIndexPattern.FindStringSubmatch(m[2]); fm != nil {
			j, ok := canonicalIndex(fm[1])
			switch {
			case !ok:
				return fmt.Sprintf("folder index %s of account %d is not written as a plain number: indexes are 0, 1, 2, … without leading zeros", fm[1], i)
			case j >= len(raw.Accounts[i].Folders):
				return fmt.Sprintf("folder index %d of account %d follows a gap: indexes must be 0, 1, 2, … without gaps, and no %sACCOUNTS_%d_FOLDERS_%d_* variable is set, so folder %d and every later one are not read", j, i, Prefix, i, len(raw.Accounts[i].Folders), j)
			}
		}
	}
	if m := accountIndexPattern.FindStringSubmatch(k); m != nil {
		if replacement, ok := retiredAccountVariables[m[2]]; ok {
			return "is no longer read: " + replacement.why + "; did you mean " + accountVar(mustAtoi(m[1]), replacement.name) + "?"
		}
	}
	msg := "is not a MailFathom variable"
	if strings.HasPrefix(k, resilienceSectionPrefix) {
		msg += explainUnknownResilience(k)
	}
	if s := suggest(k); s != "" {
		msg += "; did you mean " + s + "?"
	}
	return msg
}

// retiredAccountVariables are account variables an earlier release read,
// by the name after MAILFATHOM_ACCOUNTS_<i>_, with the variable that
// replaced each and how its values translate. Setting one fails startup
// like any unknown variable, saying what to set instead, rather than
// being read under its old meaning.
var retiredAccountVariables = map[string]struct{ name, why string }{
	"COMPRESSION_ENABLED": {"COMPRESSION", "COMPRESSION (auto, on or off) replaced it: true was on, false is off, and the default is now auto"},
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// canonicalIndex parses an index written without leading zeros.
func canonicalIndex(s string) (int, bool) {
	if len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, false
	}
	return n, true
}

// suggest returns the known variable closest to name by edit distance,
// compared with indexes abstracted away and rendered with name's own
// indexes, or "" when nothing is close.
func suggest(name string) string {
	shape := digitRuns.ReplaceAllString(name, "#")
	best, bestDist := "", -1
	for _, v := range Variables() {
		candidate := strings.NewReplacer("<i>", "#", "<j>", "#").Replace(v.Name)
		d := editDistance(shape, candidate)
		if bestDist < 0 || d < bestDist {
			best, bestDist = candidate, d
		}
	}
	limit := max(2, (len(shape)-len(Prefix))/4)
	if bestDist < 0 || bestDist > limit {
		return ""
	}
	indexes := digitRuns.FindAllString(name, -1)
	var b strings.Builder
	for _, r := range best {
		if r != '#' {
			b.WriteRune(r)
			continue
		}
		if len(indexes) > 0 {
			b.WriteString(indexes[0])
			indexes = indexes[1:]
		} else {
			b.WriteString("0")
		}
	}
	return b.String()
}

// editDistance is the Levenshtein distance between a and b, by byte.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
