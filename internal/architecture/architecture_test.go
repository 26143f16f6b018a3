package architecture_test

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	Imports    []string
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

// stores are the packages allowed to hold SQL.
var stores = []string{
	"internal/mailstore", "internal/searchindex", "internal/jobqueue", "internal/liveness",
	"internal/slots", "schema", "internal/pgcluster",
}

// sqlStatement matches a statement, not a bare word: "SELECT" alone is
// also an IMAP command (RFC 9051 §6.3.2).
var sqlStatement = regexp.MustCompile(`(?is)^\s*(SELECT\s+\S|(INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|WITH\s+\w+\s+AS)\b)`)

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

// writeReach names what only the mutation path may reference: the write
// connection, the way to open one, and the mailbox layer's write session
// and its opener. A package that can name none of them cannot hold one,
// so nothing on the read side can change a mailbox.
var writeReach = map[string][]string{
	module + "imapx":                {"OpenWriteConnection", "WriteConnection"},
	module + "internal/mailsession": {"WriteOpener", "WriteSession", "WriteSessionConfig", "NewWriteSession"},
}

// writeReachAllowed are the packages that may reference writeReach: the
// two that define it, internal/mutation, which carries every change over
// it, and workers, the wiring that builds the mutation path's opener
// (imapx.OpenWriteConnection over the account's endpoint) and hands it to
// internal/mutation. internal/service and cmd only start workers, so they
// are not on the list.
var writeReachAllowed = []string{"imapx", "internal/mailsession", "internal/mutation", "workers"}

// writeReachIn returns where file references writeReach: a selector on an
// import of one of its packages (under any name), or a dot import of one.
func writeReachIn(fset *token.FileSet, file *ast.File) []string {
	imported := map[string]string{} // local name → import path
	var found []string
	for _, spec := range file.Imports {
		path := strings.Trim(spec.Path.Value, `"`)
		if _, ok := writeReach[path]; !ok {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if spec.Name != nil {
			name = spec.Name.Name
		}
		if name == "." {
			found = append(found, fmt.Sprintf("%s: dot import of %s", fset.Position(spec.Pos()), path))
			continue
		}
		imported[name] = path
	}
	ast.Inspect(file, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok || x.Obj != nil {
			return true // not a package name (a local shadows it)
		}
		if path, ok := imported[x.Name]; ok && slices.Contains(writeReach[path], sel.Sel.Name) {
			found = append(found, fmt.Sprintf("%s: %s.%s", fset.Position(sel.Pos()), x.Name, sel.Sel.Name))
		}
		return true
	})
	return found
}

// TestOnlyTheMutationPathReachesTheWriteConnection: outside
// writeReachAllowed, no package's code names the write connection, its
// opener, or the write session, so read, reconcile, watch and push code
// has no way to obtain one. Tests are not held to it: they build write
// connections against the test servers.
func TestOnlyTheMutationPathReachesTheWriteConnection(t *testing.T) {
	t.Parallel()
	for name, p := range packages(t) {
		if slices.Contains(writeReachAllowed, name) {
			continue
		}
		for _, f := range p.GoFiles {
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
			require.NoError(t, err)
			for _, at := range writeReachIn(fset, file) {
				t.Errorf("%s reaches the write side outside the mutation path: %s", name, at)
			}
		}
	}
}

// TestWriteReachIsFound: the check above finds a reference however the
// package is imported, so a read-side package that starts naming the write
// side fails it.
func TestWriteReachIsFound(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"opener": `package forwardpass
import "github.com/mailfathom/mailfathom/imapx"
var open = imapx.OpenWriteConnection`,
		"renamed": `package forwardpass
import ix "github.com/mailfathom/mailfathom/imapx"
func carry(w *ix.WriteConnection) {}`,
		"session": `package forwardpass
import "github.com/mailfathom/mailfathom/internal/mailsession"
func open(o mailsession.WriteOpener) (*mailsession.WriteSession, error) { return nil, nil }`,
		"dot": `package forwardpass
import . "github.com/mailfathom/mailfathom/imapx"
var _ = Endpoint{}`,
	} {
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, name+".go", src, 0)
		require.NoError(t, err)
		require.NotEmpty(t, writeReachIn(fset, file), name)
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "read.go", `package forwardpass
import "github.com/mailfathom/mailfathom/imapx"
func read(s *imapx.ReadSession) (imapx.FolderState, error) { return s.Examine(nil, "") }`, 0)
	require.NoError(t, err)
	require.Empty(t, writeReachIn(fset, file), "the read side's own types are not the write side")
}

// TestFailuresAreLoggedByName: no code outside internal/failure formats a
// value's Go type (%T), which for a wrapped error is *fmt.wrapError; a log
// line names a failure with failure.Name.
func TestFailuresAreLoggedByName(t *testing.T) {
	t.Parallel()
	for name, p := range packages(t) {
		if name == "internal/failure" {
			continue
		}
		for _, f := range p.GoFiles {
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
			require.NoError(t, err)
			ast.Inspect(file, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.Contains(lit.Value, "%T") {
					t.Errorf("%s: %%T names a type, not a failure; use failure.Name", fset.Position(lit.Pos()))
				}
				return true
			})
		}
	}
}
