package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/nocopyuid"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// TestMutateFromTwoProcesses: two `mailfathom mutate` processes ask for the
// same change under the same request id at the same moment; one change is
// recorded, both print it, and the serving process carries it out once —
// the message is in the destination exactly once and gone from the source,
// checked over a connection of its own.
func TestMutateFromTwoProcesses(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.URL(t))
	uiPassword := filepath.Join(b.dir, "ui-password")
	require.NoError(t, os.WriteFile(uiPassword, []byte("mutation-secret\n"), 0o600))
	b.env["MAILFATHOM_UI_ENABLED"] = "true"
	b.env["MAILFATHOM_UI_PASSWORD"] = "file:" + uiPassword
	user := b.server.NewUser()
	user.CreateFolder("Filed")
	seedCorpus(t, user, "INBOX", 3, 31, 8)
	b.addAccount(t, "movers", user, folderMapping{"inbox", "INBOX"}, folderMapping{"filed", "Filed"})
	p := b.start(t, "serve")
	b.waitSynced(t, p, 3, time.Minute)

	emailID := b.occurrence(t, "INBOX", 1).ID.String()

	outs := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(binary(t), "mutate", "-request-id", "same-request", "move", emailID, "filed")
			cmd.Env = fromEnv(b.env)
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		}()
	}
	wg.Wait()
	for i := range outs {
		require.NoError(t, errs[i], outs[i])
	}
	id0, id1 := strings.Fields(outs[0])[0], strings.Fields(outs[1])[0]
	require.Equal(t, id0, id1, "both processes name the one change")
	require.Equal(t, 1, strings.Count(outs[0]+outs[1], "already recorded"), "one recorded it, the other found it")

	poll.Until(t, time.Minute, "the mutation completes", func() (bool, string) {
		state := b.mutation(t, id0).State
		require.True(t, p.running(), "serve exited; log:\n%s", tailLines(p.rawLog(), 40))
		return state == mailstore.MutationCompleted, string(state) + "; log:\n" + tailLines(p.rawLog(), 40)
	})
	recorded, err := mailstore.ListMutations(t.Context(), b.pool, mailstore.MutationFilter{})
	require.NoError(t, err)
	require.Len(t, recorded, 1)
	require.NotContains(t, user.UIDs("INBOX"), imap.UID(1))
	require.Len(t, user.UIDs("Filed"), 1)

	cmd := exec.Command(binary(t), "mutations", "-state", "completed")
	cmd.Env = fromEnv(b.env)
	out, err := cmd.Output()
	require.NoError(t, err)
	require.Contains(t, string(out), id0)

	// The API reads the same, behind River UI's password.
	get := func(auth bool) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodGet, "http://"+p.addr(t)+"/api/v1/mutations/"+id0, nil)
		require.NoError(t, err)
		if auth {
			req.SetBasicAuth("admin", "mutation-secret")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	code, _ := get(false)
	require.Equal(t, http.StatusUnauthorized, code)
	code, body := get(true)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "completed", body["state"])
	require.Equal(t, "move", body["kind"])
	p.stop(t)
}

// TestRelocationSurvivesSIGKILL: `serve` is killed with SIGKILL as soon as
// a relocation on a server without MOVE has its copy confirmed (the stage
// after it may already have run: the kill lands wherever the sequence is
// by then, never before the copy was recorded), and a new process carries
// it on at the account's next run: the message ends in the destination
// exactly once and gone from the source, and the owner's own \Deleted
// message is still there.
func TestRelocationSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.URL(t), dovecot.WithCapability("IMAP4rev1 IDLE SPECIAL-USE LIST-EXTENDED LIST-STATUS NAMESPACE AUTH=PLAIN UIDPLUS"))
	user := b.server.NewUser()
	user.CreateFolder("Filed")
	seedCorpus(t, user, "INBOX", 2, 32, 8)
	owners := user.Append("INBOX", []byte("From: a@example.test\r\nSubject: kept\r\n\r\nowner's\r\n"), time.Now(), imap.FlagDeleted)
	b.addAccount(t, "killed", user, folderMapping{"inbox", "INBOX"}, folderMapping{"filed", "Filed"})
	p := b.start(t, "serve-1")
	b.waitSynced(t, p, 3, time.Minute)

	emailID := b.occurrence(t, "INBOX", 1).ID.String()
	cmd := exec.Command(binary(t), "mutate", "move", emailID, "filed")
	cmd.Env = fromEnv(b.env)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	id := strings.Fields(string(out))[0]

	stage := func() (mailstore.MutationStage, mailstore.MutationState) {
		m := b.mutation(t, id)
		return m.Stage, m.State
	}
	// Asked every millisecond: the kill is to land just after the copy
	// is confirmed, before the move goes on.
	poll.Every(t, time.Millisecond, time.Minute, "the copy confirmed", func() bool {
		s, _ := stage()
		return s != mailstore.StageRecorded && s != mailstore.StagePlacementIssued
	}, func() string { return "log:\n" + tailLines(p.rawLog(), 40) })
	p.kill(t)
	killedAt, _ := stage()
	t.Logf("killed at stage %s", killedAt)

	p = b.start(t, "serve-2")
	// The account's next run converges what the killed process left.
	dbassert.MakeJobsDue(t, b.pool, "account_run", rivertype.JobStateScheduled)
	poll.Until(t, 2*time.Minute, "completed after the restart", func() (bool, string) {
		_, state := stage()
		require.True(t, p.running(), "serve exited; log:\n%s", tailLines(p.rawLog(), 40))
		return state == mailstore.MutationCompleted, string(state) + "; log:\n" + tailLines(p.rawLog(), 40)
	})
	require.NotContains(t, user.UIDs("INBOX"), imap.UID(1))
	require.Contains(t, user.UIDs("INBOX"), owners)
	require.Len(t, user.UIDs("Filed"), 1, "in the destination exactly once")
	p.stop(t)
}

// TestRelocationWithoutUIDPlus: against a server that offers MOVE but not
// UIDPLUS, and so names no placement in its answer, a move asked through
// MCP ends with exactly one served copy of the message, in the
// destination; and every place an operator or an assistant reads the
// change says it is completed and unjoined — `mailfathom mutations`, MCP's
// get_mutation, /api/v1/status and the /status page.
func TestRelocationWithoutUIDPlus(t *testing.T) {
	t.Parallel()
	// Dovecot names the placement even when UIDPLUS is not advertised: the
	// account reaches it through a filter that takes COPYUID out.
	b := setup(t, dbtest.URL(t), dovecot.WithCapability(nocopyuid.Capabilities))
	uiPassword := filepath.Join(b.dir, "ui-password")
	require.NoError(t, os.WriteFile(uiPassword, []byte("unjoined-secret\n"), 0o600))
	b.env["MAILFATHOM_UI_ENABLED"] = "true"
	b.env["MAILFATHOM_UI_PASSWORD"] = "file:" + uiPassword
	user := b.server.NewUser()
	user.CreateFolder("Filed")
	seedCorpus(t, user, "INBOX", 3, 34, 8)
	b.addAccount(t, "plain", user, folderMapping{"inbox", "INBOX"}, folderMapping{"filed", "Filed"})
	proxy := nocopyuid.Start(t, b.server.Addr())
	const acct = "MAILFATHOM_ACCOUNTS_0_"
	b.env[acct+"HOST"] = proxy.Host()
	b.env[acct+"PORT"] = strconv.Itoa(proxy.Port())
	b.env[acct+"CONNECTION_SECURITY"] = "None"
	b.env[acct+"ALLOW_INSECURE_CONNECTION"] = "true"
	b.env[acct+"ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION"] = "true"
	delete(b.env, acct+"CERTIFICATE_TRUST")
	delete(b.env, acct+"TRUSTED_CERTIFICATE_AUTHORITY")
	p := b.start(t, "serve")
	b.waitSynced(t, p, 3, time.Minute)

	ctx := t.Context()
	first := b.occurrence(t, "INBOX", 1)
	emailID, sha := first.ID.String(), first.ContentSHA256
	require.NotNil(t, sha, "the message's content is stored")
	// served returns the aliases serving an occurrence that holds the
	// message's content.
	served := func() []string {
		var aliases []string
		for _, o := range dbassert.Occurrences(t, b.pool, "") {
			if o.Served && bytes.Equal(o.ContentSHA256, sha) {
				aliases = append(aliases, o.Alias)
			}
		}
		slices.Sort(aliases)
		return aliases
	}

	cmd := exec.Command(binary(t), "mcp")
	cmd.Env = fromEnv(b.env)
	var stdioLog capture.Buffer
	cmd.Stderr = &stdioLog
	mcpSession, err := mcp.NewClient(&mcp.Implementation{Name: "mailfathom-e2e", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "stderr:\n%s", stdioLog.String())
	defer mcpSession.Close()
	move := mcpCall[mcpMutation](t, mcpSession, "move_email", map[string]any{"email_id": emailID, "destination_alias": "filed"})

	poll.Every(t, 50*time.Millisecond, time.Minute, "the move completed",
		func() bool { return b.mutation(t, move.ID).State == mailstore.MutationCompleted },
		func() string { return string(b.mutation(t, move.ID).State) + "; log:\n" + tailLines(p.rawLog(), 40) })
	require.NotContains(t, user.UIDs("INBOX"), imap.UID(1))
	require.Len(t, user.UIDs("Filed"), 1)
	require.Positive(t, proxy.Removed(), "the server named the placement and the filter took it out")

	// The account's next run meets both halves: the copy in the
	// destination, and the source gone.
	dbassert.MakeJobsDue(t, b.pool, "account_run", rivertype.JobStateScheduled)
	poll.Until(t, time.Minute, "only the destination's copy is served", func() (bool, string) {
		copies := served()
		require.True(t, p.running(), "serve exited; log:\n%s", tailLines(p.rawLog(), 40))
		return slices.Equal(copies, []string{"FILED"}), fmt.Sprintf("%v; log:\n%s", copies, tailLines(p.rawLog(), 40))
	})

	got := mcpCall[struct {
		State   string `json:"state"`
		Summary string `json:"summary"`
	}](t, mcpSession, "get_mutation", map[string]any{"mutation_id": move.ID})
	require.Equal(t, "completed", got.State)
	require.Equal(t, "completed, unjoined", got.Summary)

	list := exec.Command(binary(t), "mutations", "-account", "plain")
	list.Env = fromEnv(b.env)
	out, err := list.Output()
	require.NoError(t, err)
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, move.ID) {
			line = l
		}
	}
	require.Contains(t, line, "completed, unjoined", string(out))

	get := func(path string) []byte {
		req, err := http.NewRequest(http.MethodGet, "http://"+p.addr(t)+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth("admin", "unjoined-secret")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return body
	}
	var rep status.Report
	require.NoError(t, json.Unmarshal(get("/api/v1/status"), &rep))
	require.Len(t, rep.Accounts, 1)
	require.EqualValues(t, 1, rep.Accounts[0].Mutations.CompletedUnjoined)
	require.Contains(t, string(get("/status")), "1 move(s) or copy(ies) completed, unjoined")
	p.stop(t)
}

// occurrence returns the occurrence stored at uid of alias, of whichever
// account and binding, and fails the test when there is none.
func (b *testBundle) occurrence(t testing.TB, alias string, uid uint32) dbassert.Occurrence {
	t.Helper()
	for _, o := range dbassert.Occurrences(t, b.pool, alias) {
		if o.UID == uid {
			return o
		}
	}
	t.Fatalf("nothing is stored at UID %d of %s", uid, alias)
	return dbassert.Occurrence{}
}

// mutation reads the mailbox mutation id, and fails the test when it is
// not recorded.
func (b *testBundle) mutation(t testing.TB, id string) mailstore.Mutation {
	t.Helper()
	parsed, err := uuid.Parse(id)
	require.NoError(t, err)
	m, ok, err := mailstore.ReadMutation(t.Context(), b.pool, parsed)
	require.NoError(t, err)
	require.True(t, ok, "mutation %s is recorded", id)
	return m
}
