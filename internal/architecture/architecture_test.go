package architecture_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/mailfathom/mailfathom/"

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Deps       []string
}

// packages lists the module's packages with their transitive dependencies.
func packages(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json", module+"...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	require.NoError(t, err)
	all := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		require.NoError(t, dec.Decode(&p))
		all[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	require.Contains(t, all, "imapx")
	return all
}

func ours(deps []string) []string {
	var out []string
	for _, d := range deps {
		if rest, ok := strings.CutPrefix(d, module); ok {
			out = append(out, rest)
		}
	}
	return out
}

// TestArrowsPointDown: the generic packages import nothing of MailFathom's,
// and nothing below the adapters reads configuration.
func TestArrowsPointDown(t *testing.T) {
	t.Parallel()
	all := packages(t)
	for name, forbidden := range map[string][]string{
		"internal/resilience":   {"*"},
		"internal/failure":      {"*"},
		"mimex":                 {"*"},
		"jobs":                  {"imapx", "internal/mailstore", "internal/searchindex"},
		"imapx":                 {"internal/config", "workers", "internal/mailstore"},
		"internal/sasl":         {"internal/config", "imapx"},
		"internal/mailstore":    {"internal/config", "imapx", "workers"},
		"internal/forwardpass":  {"workers", "internal/service"},
		"internal/backwardpass": {"workers", "internal/service"},
		"internal/push":         {"workers", "internal/service"},
	} {
		p, ok := all[name]
		require.True(t, ok, name)
		deps := ours(p.Deps)
		for _, f := range forbidden {
			if f == "*" {
				require.Empty(t, deps, "%s imports MailFathom packages", name)
				continue
			}
			require.NotContains(t, deps, f, "%s imports %s", name, f)
		}
	}
}

// stores are the packages allowed to hold SQL.
var stores = []string{
	"internal/mailstore", "internal/searchindex", "internal/jobqueue", "internal/liveness",
	"internal/slots", "schema", "internal/pgcluster",
}

var sqlStatement = regexp.MustCompile(`(?is)^\s*(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|WITH\s+\w+\s+AS)\b`)

// TestSQLLivesInStores: no string literal outside the stores (and the
// test harness, and tests) is a SQL statement.
func TestSQLLivesInStores(t *testing.T) {
	t.Parallel()
	for name, p := range packages(t) {
		if slices.Contains(stores, name) || strings.HasPrefix(name, "internal/testharness") {
			continue
		}
		for _, f := range p.GoFiles {
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
			require.NoError(t, err)
			ast.Inspect(file, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if ok && lit.Kind == token.STRING && sqlStatement.MatchString(strings.Trim(lit.Value, "`\"")) {
					t.Errorf("%s: SQL outside a store package", fset.Position(lit.Pos()))
				}
				return true
			})
		}
	}
}
