package architecture_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// layers ranks every package of the module, lowest first: a package may
// import only packages of a lower layer. A package that is not listed
// fails the test, so a new one is given its place when it is written.
var layers = [][]string{
	// The failure vocabulary every classifier speaks.
	{"internal/failure"},
	// Generic: nothing of MailFathom's below them but the vocabulary.
	{"internal/resilience", "internal/heapgoal", "internal/sysdeps", "internal/liveness",
		"internal/httpserver", "jobs", "mimex", "schema", "riverui"},
	// Stores and the small adapters below the protocol.
	{"internal/mailstore", "internal/slots", "internal/jobqueue", "internal/database", "internal/pgcluster",
		"internal/secret", "internal/sasl", "internal/folders", "imapx/internal/wire"},
	// The IMAP adapter and certificates.
	{"imapx", "internal/trustanchor"},
	// Configuration: converts the environment into the adapters' types.
	{"internal/config"},
	// What reads a configuration type it is handed: search's text
	// configuration, an account's token endpoint; and the mailbox layer.
	{"internal/searchindex", "internal/mailoauth", "internal/mailsession"},
	// The engines of the units of work and the outbound adapters.
	{"internal/forwardpass", "internal/backwardpass", "internal/backfill", "internal/embedding",
		"internal/mailendpoint", "internal/outbound"},
	// The services the units and the tools share.
	{"internal/push", "internal/mutation", "internal/status", "internal/mailsearch"},
	// The account run, which carries mutations forward before it lists
	// the folders whose passes it schedules.
	{"internal/accountrun"},
	// The workers, and the assistants' tools.
	{"workers", "internal/mcpserver"},
	// serve, and the command that starts it.
	{"internal/service"},
	{"cmd/mailfathom"},
}

// harnessLayers ranks the test harness the same way, beside the product:
// product packages never import it (TestProductImportsNoHarness).
var harnessLayers = [][]string{
	{"internal/testharness/loopback"},
	{"internal/testharness/capture", "internal/testharness/dbassert", "internal/testharness/embedtest",
		"internal/testharness/faultproxy", "internal/testharness/imapscript", "internal/testharness/mailbox",
		"internal/testharness/mailbox/mailboxtest", "internal/testharness/mailgen", "internal/testharness/nocopyuid",
		"internal/testharness/nonroot", "internal/testharness/oauthtest", "internal/testharness/poll",
		"internal/testharness/serverproc", "internal/testharness/testca", "internal/testharness/wiretap"},
	{"internal/testharness/cyrus", "internal/testharness/dovecot", "internal/testharness/pgtest"},
	{"internal/testharness/dbtest", "internal/testharness/gmailtest"},
	{"internal/testharness/vectortest", "internal/testharness/verdicts"},
	// Packages that hold only tests.
	{"internal/architecture", "internal/e2e"},
}

// rankOf returns each ranked package's rank: its layer's index, the
// harness's layers counted from the product's lowest.
func rankOf(t *testing.T) map[string]int {
	t.Helper()
	rank := map[string]int{}
	for _, ls := range [][][]string{layers, harnessLayers} {
		for i, layer := range ls {
			for _, p := range layer {
				_, dup := rank[p]
				require.False(t, dup, "%s is ranked twice", p)
				rank[p] = i
			}
		}
	}
	return rank
}

// TestEveryImportPointsDown: every package has a rank, and imports only
// packages ranked below it.
func TestEveryImportPointsDown(t *testing.T) {
	t.Parallel()
	rank := rankOf(t)
	all := packages(t)
	for _, name := range slices.Sorted(maps.Keys(all)) {
		r, ok := rank[name]
		if !ok {
			t.Errorf("%s has no rank: give it a layer in rank_test.go", name)
			continue
		}
		harness := strings.HasPrefix(name, "internal/testharness/") || name == "internal/architecture" || name == "internal/e2e"
		for _, imp := range ours(all[name].Imports) {
			ir, ok := rank[imp]
			if !ok {
				continue // reported as its own package
			}
			importsHarness := strings.HasPrefix(imp, "internal/testharness/")
			switch {
			case harness && !importsHarness:
				// The harness may use any product package below the
				// top; the product's own order still holds for them.
			case ir >= r:
				t.Errorf("%s (layer %d) imports %s (layer %d): arrows point down", name, r, imp, ir)
			}
		}
	}
	for p := range rank {
		require.Contains(t, all, p, "a ranked package that no longer exists: remove it from rank_test.go")
	}
}

// TestProductImportsNoHarness: no product package imports the test
// harness.
func TestProductImportsNoHarness(t *testing.T) {
	t.Parallel()
	for name, p := range packages(t) {
		if strings.HasPrefix(name, "internal/testharness/") || name == "internal/architecture" || name == "internal/e2e" {
			continue
		}
		for _, imp := range ours(p.Imports) {
			require.False(t, strings.HasPrefix(imp, "internal/testharness/"), "%s imports %s", name, imp)
		}
	}
}

var (
	mermaidNode  = regexp.MustCompile(`(\w+)\["([^"]*)"\]`)
	mermaidArrow = regexp.MustCompile(`^\s*(\w+)(?:\[[^\]]*\])?\s*-->\s*(\w+)`)
	packageWord  = regexp.MustCompile(`(?:internal/[\w/]+|imapx(?:/internal/wire)?|mimex|workers|jobs|schema|riverui|cmd/mailfathom)`)
)

// TestTheDiagramDrawsTheImports: every arrow ARCHITECTURE.md's diagram
// draws between packages is an import go list reports. A node names its
// packages in its label; the stores subgraph stands for its members.
func TestTheDiagramDrawsTheImports(t *testing.T) {
	t.Parallel()
	all := packages(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "ARCHITECTURE.md"))
	require.NoError(t, err)
	text := string(doc)
	start := strings.Index(text, "```mermaid")
	require.GreaterOrEqual(t, start, 0, "ARCHITECTURE.md has a mermaid diagram")
	end := strings.Index(text[start+3:], "```")
	diagram := text[start : start+3+end]

	nodes := map[string][]string{}
	for _, m := range mermaidNode.FindAllStringSubmatch(diagram, -1) {
		for _, p := range packageWord.FindAllString(m[2], -1) {
			if _, ok := all[p]; ok && !slices.Contains(nodes[m[1]], p) {
				nodes[m[1]] = append(nodes[m[1]], p)
			}
		}
	}
	// A node named after its package without a label, as in "x --> imapx".
	for name := range all {
		if id := filepath.Base(name); nodes[id] == nil && !strings.Contains(diagram, id+"[") {
			nodes[id] = []string{name}
		}
	}
	nodes["stores"] = stores
	arrows := 0
	for _, line := range strings.Split(diagram, "\n") {
		m := mermaidArrow.FindStringSubmatch(line)
		if m == nil || nodes[m[1]] == nil || nodes[m[2]] == nil {
			continue // an arrow to or from something outside the module
		}
		arrows++
		found := false
		for _, from := range nodes[m[1]] {
			for _, to := range nodes[m[2]] {
				found = found || slices.Contains(ours(all[from].Imports), to)
			}
		}
		require.True(t, found, "ARCHITECTURE.md draws %s --> %s, but %v imports none of %v", m[1], m[2], nodes[m[1]], nodes[m[2]])
	}
	require.Greater(t, arrows, 20, "the diagram's arrows were read")
}
