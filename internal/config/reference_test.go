package config

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
)

// documentedVariables reads the variable tables of REFERENCE.md: name to the
// text of its Default cell.
func documentedVariables(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("REFERENCE.md")
	require.NoError(t, err)
	row := regexp.MustCompile("^\\| `(MAILFATHOM_[A-Z0-9_<>ij]+)` \\|([^|]*)\\|")
	out := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		_, dup := out[m[1]]
		require.False(t, dup, "%s is documented twice", m[1])
		out[m[1]] = strings.TrimSpace(m[2])
	}
	return out
}

func TestReferenceDocumentsEveryVariable(t *testing.T) {
	t.Parallel()
	documented := documentedVariables(t)
	bound := map[string]bool{}
	var undocumented, unbound []string
	for _, v := range Variables() {
		bound[v.Name] = true
		if _, ok := documented[v.Name]; !ok {
			undocumented = append(undocumented, v.Name)
		}
	}
	for name := range documented {
		if !bound[name] {
			unbound = append(unbound, name)
		}
	}
	sort.Strings(unbound)
	require.NotEmpty(t, bound)
	require.Empty(t, undocumented, "variables the binding reads but REFERENCE.md does not document")
	require.Empty(t, unbound, "variables REFERENCE.md documents but the binding does not read")
}

func TestReferenceDocumentsDefaults(t *testing.T) {
	t.Parallel()
	documented := documentedVariables(t)
	singleLiteral := regexp.MustCompile("^`[^`]*`$")
	for _, v := range Variables() {
		cell := documented[v.Name]
		if v.Default != "" {
			require.Equal(t, "`"+v.Default+"`", cell, "default of %s", v.Name)
		} else {
			require.False(t, singleLiteral.MatchString(cell), "%s is documented with a default (%s) the binding does not have", v.Name, cell)
		}
	}
}

func TestReferenceDocumentsRuleIdentities(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("REFERENCE.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), "`"+RuleFeatureNotAvailable+"`")
	for _, rule := range []string{
		imapx.RuleUnencryptedConnectionRequiresExplicitOptIn,
		imapx.RuleClearTextAuthenticationRequiresExplicitOptIn,
		imapx.RuleAuthenticationMechanismNotSupported,
		RuleTrustAnchorNotExpected,
		RuleTrustAnchorRequired,
		RuleTrustAnchorPasswordWithoutTrustAnchor,
		RuleOAuthRequired,
		RuleOAuthIncomplete,
		RuleOAuthNotExpected,
		RulePasswordNotExpected,
		"ReferenceMalformed", "MaterialMissing", "SecretNotResolvable",
	} {
		require.Contains(t, string(doc), "| `"+rule+"` |")
	}
}

// TestVariablesAreWhatLoadReads checks the derivation: an environment that
// sets every listed variable (indexes instantiated) has no unknown variable.
func TestVariablesAreWhatLoadReads(t *testing.T) {
	t.Parallel()
	vars := map[string]string{}
	for _, v := range Variables() {
		for _, i := range []string{"0", "1"} {
			for _, j := range []string{"0", "1"} {
				vars[strings.NewReplacer("<i>", i, "<j>", j).Replace(v.Name)] = "x"
			}
		}
	}
	_, read, err := bind(vars)
	require.NoError(t, err)
	for name := range vars {
		require.True(t, read[name], name)
	}
}
