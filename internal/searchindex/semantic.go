package searchindex

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The bounds of a semantic search.
const (
	// DefaultCandidates is how many passages a signature scan keeps for
	// re-ranking by their full vectors: the scan of the pending list, of a
	// narrow scope and of every passage while a profile has no index.
	// Measured against an exact scan (the package's benchmark), 400 keeps
	// recall@10 at or above 0.95 for 100 000 passages of 384 dimensions.
	DefaultCandidates = 400
	// DefaultProbes is how many lists of each live generation a search
	// probes first, nearest first; a search that finds fewer messages
	// than it answers probes four times as many, until every list is.
	DefaultProbes = 8
	// minRerank is the fewest messages whose best passage by code a probe
	// re-ranks by its full vector; a search re-ranks twice as many as it
	// answers.
	minRerank = 40
	// scopeScanEmails is where a narrowed search stops comparing every
	// passage of its scope and probes the lists: a scope of fewer messages
	// than this is scanned whole, since probing the lists nearest the
	// query would reach only the part of a small scope that happens to be
	// near it, and the scan of a few thousand messages' signatures takes
	// milliseconds.
	scopeScanEmails = 2000
	// MaxSemanticLimit bounds the messages one search answers.
	MaxSemanticLimit = 10_000
)

// SemanticQuery is a search by meaning: passages nearest to a query
// vector under one profile.
type SemanticQuery struct {
	// Profile is the active embedding profile; only its vectors are
	// compared. Required.
	Profile int16
	// Vector is the query's embedding under Profile, unit length.
	// Required.
	Vector []float32
	// Accounts and Account are as in Query.
	Accounts []string
	Account  string
	// Alias narrows to the emails whose own row is in a folder of the
	// alias: passages are indexed under their holder's folder, so unlike
	// Query's it does not see an occurrence that shares an email held in
	// another folder. mailsearch narrows by an alias holding such
	// occurrences through the store's filter (mailstore.InAlias) instead.
	Alias string
	// SentSince and SentUntil, when set, keep messages sent at or after
	// SentSince and before SentUntil (a message with no Date never is).
	SentSince, SentUntil *time.Time
	// Emails, when set, restricts the search to these messages: every
	// passage of them is compared (a signature scan), no list is probed.
	// For a scope another filter chose, a few thousand messages at most.
	Emails []uuid.UUID
	// Exclude are messages never answered: the one a search for similar
	// mail starts from.
	Exclude []uuid.UUID
	// Limit bounds the messages answered. Default 20, at most
	// MaxSemanticLimit. As many are answered as the scope holds
	// messages with vectors, up to Limit.
	Limit int
	// Candidates is how many passages a signature scan keeps for
	// re-ranking. Default DefaultCandidates; at most 10 000.
	Candidates int
	// Probes is how many lists of each live generation are probed
	// first. Default DefaultProbes.
	Probes int
	// Rerank is how many messages' best passages by code are re-ranked by
	// their full vectors first. Default: twice Limit, at least 40.
	Rerank int
	// Index holds the process's copy of the index's centroids. Default: a
	// fresh one, which reads them on every search.
	Index *VectorIndex
}

// narrowed reports whether q narrows the configured accounts' mail.
func (q SemanticQuery) narrowed() bool {
	return q.Account != "" || q.Alias != "" || q.SentSince != nil || q.SentUntil != nil
}

// SemanticHit is one message found by meaning.
type SemanticHit struct {
	StoredEmailID uuid.UUID
	Account       string
	Alias         string
	SentAt        *time.Time
	From          string
	Subject       string
	// Passage is the ordinal of the message's passage nearest to the
	// query, and Score its cosine similarity.
	Passage int16
	Score   float32
}

// errEmptyQueryVector is a search without a query vector.
var errEmptyQueryVector = errors.New("searchindex: empty query vector")

// SemanticSearch returns the served messages whose passages are nearest to
// query.Vector, best first, one hit per message (its best passage), scored
// by the exact cosine.
//
// Every passage's 4-bit code is scored here and the best messages'
// passages are re-ranked by their full vectors. With the profile's vector
// index the codes read are those of the lists of each live generation
// nearest the query, of its outlier list (the passages unlike every
// centroid, which no ranking of the centroids would reach reliably) and of
// the pending list, from the lists index alone;
// without one, the codes of every passage in scope; for Emails, or a
// narrowed scope of fewer than a few thousand messages, those of every
// passage in scope, through its messages. A passage stored before codes
// existed (or of a profile with too many dimensions for one) is scanned
// by signature instead (bit_count(signature # query), the candidates
// re-ranked by their full vectors) until the index's first build writes
// its code. These are approximations whose recall the package's benchmark
// measures against ExactSemanticSearch; none ever answers fewer messages
// than it was asked for while the scope holds more: a search short of
// them re-ranks more candidates, probes more lists and scans deeper, to
// every list.
func SemanticSearch(ctx context.Context, q Querier, query SemanticQuery) ([]SemanticHit, error) {
	if len(query.Vector) == 0 {
		return nil, errEmptyQueryVector
	}
	if len(query.Accounts) == 0 {
		return nil, nil
	}
	r := &semanticRun{q: q, query: query, best: map[uuid.UUID]SemanticHit{}, reranked: map[passageKey]bool{}}
	r.limit = min(cmp.Or(max(query.Limit, 0), 20), MaxSemanticLimit)
	r.candidates = min(max(cmp.Or(query.Candidates, DefaultCandidates), r.limit), 10_000)
	r.reranks = max(cmp.Or(query.Rerank, 2*r.limit), minRerank)
	r.excluded = map[uuid.UUID]bool{}
	for _, id := range query.Exclude {
		r.excluded[id] = true
	}
	ix := query.Index
	if ix == nil {
		ix = NewVectorIndex()
	}
	var serving, building int16
	var uncoded bool
	err := q.QueryRow(ctx, `
		SELECT coalesce(i.serving, 0), coalesce(i.building, 0),
		       mailfathom_vector_uncoded($1),
		       (SELECT coalesce(array_agg(f.id), '{}') FROM mail_folders f JOIN mailbox_accounts a ON a.id = f.mailbox_account_id
		        WHERE a.account_key = ANY($2) AND ($3 = '' OR a.account_key = $3) AND ($4 = '' OR f.alias = $4))
		FROM (SELECT) AS one LEFT JOIN vector_indexes i ON i.profile_id = $1`,
		query.Profile, query.Accounts, query.Account, query.Alias).Scan(&serving, &building, &uncoded, &r.folders)
	if err != nil {
		return nil, fmt.Errorf("searchindex: semantic search: %w", err)
	}
	if len(r.folders) == 0 {
		return nil, nil
	}
	if len(query.Vector) > MaxCodedDimensions {
		// Nothing of the profile has a code: every passage by signature.
		if err := r.scanDeep(ctx, scanAll); err != nil {
			return nil, err
		}
		return rankHits(r.best, r.limit), nil
	}
	view, err := ix.view(ctx, q, query.Profile, serving, building)
	if err != nil {
		return nil, err
	}
	whole := len(query.Emails) > 0
	if !whole && query.narrowed() {
		if whole, err = r.smallScope(ctx); err != nil {
			return nil, err
		}
	}
	// The codes: of the scope's every passage, or of the nearest lists
	// and the pending list.
	table := newCodeTable(query.Vector)
	if whole {
		coded, err := r.readCodes(ctx, table, nil, 0)
		if err != nil {
			return nil, err
		}
		if err := r.rerankCoded(ctx, coded); err != nil {
			return nil, err
		}
	} else if err := r.probe(ctx, table, view.live()); err != nil {
		return nil, err
	}
	if uncoded {
		scope := scanPending
		if whole {
			scope = scanScope
		}
		if err := r.scanDeep(ctx, scope); err != nil {
			return nil, err
		}
	}
	return rankHits(r.best, r.limit), nil
}

// semanticRun is one semantic search under way.
type semanticRun struct {
	q          Querier
	query      SemanticQuery
	limit      int
	candidates int
	reranks    int
	folders    []int64
	excluded   map[uuid.UUID]bool
	// best holds each message found so far with its best exact score;
	// reranked, the passages whose full vectors were compared.
	best     map[uuid.UUID]SemanticHit
	reranked map[passageKey]bool
}

// A signature scan's scope: the passages without a code among
const (
	// scanAll: every passage in scope, for a profile of more dimensions
	// than a code holds;
	scanAll = iota
	// scanPending: the pending list (a passage stored before codes
	// existed is pending until the index's first build);
	scanPending
	// scanScope: the passages of query.Emails, or of a narrowed scope of
	// few messages.
	scanScope
)

// dateConditions appends to conds the sending-date conditions of the
// query over column (a timestamptz), its arguments to args.
func (r *semanticRun) dateConditions(conds []string, args []any, column string) ([]string, []any) {
	if t := r.query.SentSince; t != nil {
		args = append(args, *t)
		conds = append(conds, fmt.Sprintf("%s >= $%d", column, len(args)))
	}
	if t := r.query.SentUntil; t != nil {
		args = append(args, *t)
		conds = append(conds, fmt.Sprintf("%s < $%d", column, len(args)))
	}
	return conds, args
}

// smallScope reports whether the narrowed scope holds fewer than
// scopeScanEmails stored messages, counting no further.
func (r *semanticRun) smallScope(ctx context.Context) (bool, error) {
	conds, args := r.dateConditions([]string{"e.mail_folder_id = ANY($1)"}, []any{r.folders}, "e.sent_at")
	args = append(args, scopeScanEmails)
	var n int
	// The simple protocol plans the count for the dates given, so a
	// narrow range is read through the sending-date index rather than a
	// folder's every message.
	err := r.q.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM stored_emails e WHERE `+strings.Join(conds, " AND ")+
		fmt.Sprintf(` LIMIT $%d) AS scope`, len(args)), append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("searchindex: semantic search: count the scope: %w", err)
	}
	return n < scopeScanEmails, nil
}

// scanDeep scans by signature, four times deeper while it finds fewer
// messages than it answers and the scope holds more passages.
func (r *semanticRun) scanDeep(ctx context.Context, scope int) error {
	for n := r.candidates; ; n *= 4 {
		got, err := r.scan(ctx, scope, n)
		if err != nil {
			return err
		}
		if len(r.best) >= r.limit || got < n {
			return nil
		}
	}
}

// scan keeps the n passages in scope whose signatures differ least from
// the query's, re-ranks them by their full vectors, and returns how many it
// kept: fewer than n when the scope holds no more.
func (r *semanticRun) scan(ctx context.Context, scope, n int) (int, error) {
	args := []any{r.query.Profile, Signature(r.query.Vector)}
	var conds []string
	from := "passage_signatures s"
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	// Unnarrowed, the pending list's scan reads the signatures alone and
	// the served and account conditions apply to the candidates: joining
	// every signature to its message cost ten times the scan at 100 000
	// passages. Mail not served (tombstoned, or of a removed account) is
	// rare, and only takes candidate places. Narrowed, the candidates are
	// chosen among its mail, so a small folder is not crowded out.
	if scope != scanPending || r.query.narrowed() {
		from = "served_stored_emails e JOIN passage_signatures s ON s.stored_email_id = e.id"
		conds = append(conds, "e.mail_folder_id = ANY("+arg(r.folders)+")")
		conds, args = r.dateConditions(conds, args, "e.sent_at")
	}
	conds = append(conds, "s.profile_id = $1")
	if scope != scanAll {
		conds = append(conds, "s.code IS NULL")
	}
	switch {
	case scope == scanPending:
		conds = append(conds, "s.list_id = 0")
	case len(r.query.Emails) > 0:
		conds = append(conds, "s.stored_email_id = ANY("+arg(r.query.Emails)+"::uuid[])")
	}
	if len(r.query.Exclude) > 0 {
		conds = append(conds, "s.stored_email_id <> ALL("+arg(r.query.Exclude)+"::uuid[])")
	}
	rows, err := r.q.Query(ctx, `
		SELECT s.stored_email_id, s.ordinal
		FROM `+from+`
		WHERE `+strings.Join(conds, " AND ")+`
		ORDER BY bit_count(s.signature # $2::varbit)
		LIMIT `+arg(n), args...)
	if err != nil {
		return 0, fmt.Errorf("searchindex: semantic search: scan signatures: %w", err)
	}
	var keys []passageKey
	var k passageKey
	_, err = pgx.ForEachRow(rows, []any{&k.id, &k.ordinal}, func() error {
		keys = append(keys, k)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("searchindex: semantic search: scan signatures: %w", err)
	}
	return len(keys), r.rerank(ctx, keys)
}

// probe finds messages through the lists of gens: it reads the codes of
// the passages in scope in each generation's lists nearest the query, in
// its outlier list, and in every list below the oldest generation's (the
// pending list, and a passage written into a generation since replaced),
// and re-ranks the best
// messages (rerankCoded); while fewer messages are found than answered it
// probes four times as many lists, up to all of them.
func (r *semanticRun) probe(ctx context.Context, table codeTable, gens []*generation) error {
	ranked := make([][]int, len(gens))
	most := 0
	for i, g := range gens {
		ranked[i] = g.lists.ranked(r.query.Vector)
		most = max(most, len(ranked[i]))
	}
	below := int32(1)
	if len(gens) > 0 {
		below = firstListID(gens[0].number)
		for _, g := range gens[1:] {
			below = min(below, firstListID(g.number))
		}
	}
	for probes := cmp.Or(r.query.Probes, DefaultProbes); ; probes *= 4 {
		var lists []int32
		for i, g := range gens {
			lists = append(lists, g.outlierList())
			for _, at := range ranked[i][:min(probes, len(ranked[i]))] {
				lists = append(lists, g.listID(at))
			}
		}
		coded, err := r.readCodes(ctx, table, lists, below)
		if err != nil {
			return err
		}
		if err := r.rerankCoded(ctx, coded); err != nil {
			return err
		}
		if len(r.best) >= r.limit || probes >= most {
			return nil
		}
	}
}

// rerankCoded re-ranks the best r.reranks messages of coded by their best
// passage's full vector, four times as many while fewer messages are found
// than answered, up to all of them.
func (r *semanticRun) rerankCoded(ctx context.Context, coded []coded) error {
	for n := r.reranks; ; n *= 4 {
		var keys []passageKey
		for _, c := range coded[:min(n, len(coded))] {
			keys = append(keys, c.key)
		}
		if err := r.rerank(ctx, keys); err != nil {
			return err
		}
		if len(r.best) >= r.limit || n >= len(coded) {
			return nil
		}
	}
}

// coded is a message's best passage by code.
type coded struct {
	key   passageKey
	score float32
}

// readCodes returns the messages in scope with a coded passage in lists or
// below the list below — or, for nil lists, anywhere (read through the
// scope's messages) — each with its best passage by code score, best
// first (ties by id).
func (r *semanticRun) readCodes(ctx context.Context, table codeTable, lists []int32, below int32) ([]coded, error) {
	var statement string
	var args []any
	if lists != nil || below > 0 {
		statement = `SELECT stored_email_id, ordinal, code FROM mailfathom_vector_codes($1, $2, $3, $4, $5, $6)`
		args = []any{r.query.Profile, append([]int32{}, lists...), below, r.folders, r.query.SentSince, r.query.SentUntil}
	} else {
		conds := []string{"e.mail_folder_id = ANY($2::bigint[])", "s.code IS NOT NULL"}
		conds, args = r.dateConditions(conds, []any{r.query.Profile, r.folders}, "e.sent_at")
		if len(r.query.Emails) > 0 {
			args = append(args, r.query.Emails)
			conds = append(conds, fmt.Sprintf("e.id = ANY($%d::uuid[])", len(args)))
		}
		statement = `SELECT s.stored_email_id, s.ordinal, s.code
			FROM served_stored_emails e JOIN passage_signatures s ON s.stored_email_id = e.id AND s.profile_id = $1
			WHERE ` + strings.Join(conds, " AND ")
	}
	rows, err := r.q.Query(ctx, statement, args...)
	if err != nil {
		return nil, fmt.Errorf("searchindex: semantic search: read codes: %w", err)
	}
	defer rows.Close()
	best := map[uuid.UUID]coded{}
	for rows.Next() {
		// The three columns in PostgreSQL's binary format, read in place:
		// a probe reads thousands of rows, and scanning each into values
		// cost more than scoring it.
		raw := rows.RawValues()
		if len(raw[0]) != 16 || len(raw[1]) != 2 {
			return nil, errors.New("searchindex: semantic search: read codes: a row is not in the binary format")
		}
		id := uuid.UUID(raw[0])
		if r.excluded[id] {
			continue
		}
		score, ok := table.score(raw[2])
		if !ok {
			continue
		}
		if b, seen := best[id]; !seen || score > b.score {
			best[id] = coded{key: passageKey{id: id, ordinal: int16(binary.BigEndian.Uint16(raw[1]))}, score: score}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("searchindex: semantic search: read codes: %w", err)
	}
	out := make([]coded, 0, len(best))
	for _, c := range best {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b coded) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return slices.Compare(a.key.id[:], b.key.id[:])
	})
	return out, nil
}

// rerank compares the full vectors of the passages of keys not compared
// yet with the query and records each served message in scope with its
// best exact score. Each message is looked up by its id (a LATERAL
// subquery, kept apart by OFFSET 0): left to itself, the planner misjudged
// how much of the mailbox an account holds and joined every message to
// the candidates.
func (r *semanticRun) rerank(ctx context.Context, keys []passageKey) error {
	ids := make([]uuid.UUID, 0, len(keys))
	ords := make([]int16, 0, len(keys))
	for _, k := range keys {
		if !r.reranked[k] {
			r.reranked[k] = true
			ids, ords = append(ids, k.id), append(ords, k.ordinal)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	conds, args := r.dateConditions([]string{"e.id = c.id", "e.mail_folder_id = ANY($4)"},
		[]any{r.query.Profile, ids, ords, r.folders}, "e.sent_at")
	rows, err := r.q.Query(ctx, `
		SELECT c.id, c.o, v.vector, m.account_key, m.alias, m.sent_at, m.sender, m.subject
		FROM unnest($2::uuid[], $3::smallint[]) AS c(id, o)
		CROSS JOIN LATERAL (
			SELECT a.account_key, f.alias, e.sent_at,
			       coalesce((SELECT p.address FROM email_participants p
			                 WHERE p.stored_email_id = e.id AND p.role = 'From' ORDER BY p.position LIMIT 1), '') AS sender,
			       coalesce(e.subject, '') AS subject
			FROM served_stored_emails e
			JOIN mail_folders f ON f.id = e.mail_folder_id
			JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
			WHERE `+strings.Join(conds, " AND ")+`
			OFFSET 0) m
		JOIN passage_vectors v ON v.stored_email_id = c.id AND v.ordinal = c.o AND v.profile_id = $1`, args...)
	if err != nil {
		return fmt.Errorf("searchindex: semantic search: re-rank: %w", err)
	}
	var vec []byte
	var h SemanticHit
	_, err = pgx.ForEachRow(rows, []any{&h.StoredEmailID, &h.Passage, &vec, &h.Account, &h.Alias, &h.SentAt, &h.From, &h.Subject}, func() error {
		score, err := dot(r.query.Vector, vec)
		if err != nil {
			return err
		}
		if b, ok := r.best[h.StoredEmailID]; !ok || score > b.Score {
			hit := h
			hit.Score = score
			r.best[h.StoredEmailID] = hit
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("searchindex: semantic search: re-rank: %w", err)
	}
	return nil
}

// ExactSemanticSearch is SemanticSearch comparing every vector of the
// profile in scope (Accounts, Account, Alias, SentSince, SentUntil,
// Emails, Exclude): the reference the fast search's recall is measured
// against, and far too slow for a large mailbox. It ignores Candidates,
// Probes and Rerank; it reads only the profile's vectors.
func ExactSemanticSearch(ctx context.Context, q Querier, query SemanticQuery) ([]SemanticHit, error) {
	if len(query.Vector) == 0 {
		return nil, errEmptyQueryVector
	}
	limit := min(cmp.Or(max(query.Limit, 0), 20), MaxSemanticLimit)
	r := &semanticRun{query: query}
	conds, args := r.dateConditions([]string{
		"s.profile_id = $1", "a.account_key = ANY($2)", "($3 = '' OR a.account_key = $3)", "($4 = '' OR f.alias = $4)",
	}, []any{query.Profile, query.Accounts, query.Account, query.Alias}, "e.sent_at")
	if len(query.Emails) > 0 {
		args = append(args, query.Emails)
		conds = append(conds, fmt.Sprintf("e.id = ANY($%d::uuid[])", len(args)))
	}
	if len(query.Exclude) > 0 {
		args = append(args, query.Exclude)
		conds = append(conds, fmt.Sprintf("e.id <> ALL($%d::uuid[])", len(args)))
	}
	rows, err := q.Query(ctx, `
		SELECT v.stored_email_id, v.ordinal, v.vector
		FROM passage_signatures s
		JOIN passage_vectors v ON v.stored_email_id = s.stored_email_id AND v.ordinal = s.ordinal AND v.profile_id = s.profile_id
		JOIN served_stored_emails e ON e.id = s.stored_email_id
		JOIN mail_folders f ON f.id = e.mail_folder_id
		JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
		WHERE `+strings.Join(conds, " AND "), args...)
	if err != nil {
		return nil, fmt.Errorf("searchindex: exact semantic search: %w", err)
	}
	best := map[uuid.UUID]SemanticHit{}
	var h SemanticHit
	var vec []byte
	_, err = pgx.ForEachRow(rows, []any{&h.StoredEmailID, &h.Passage, &vec}, func() error {
		score, err := dot(query.Vector, vec)
		if err != nil {
			return err
		}
		if b, ok := best[h.StoredEmailID]; !ok || score > b.Score {
			hit := h
			hit.Score = score
			best[h.StoredEmailID] = hit
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("searchindex: exact semantic search: %w", err)
	}
	return rankHits(best, limit), nil
}

// rankHits orders hits best first (ties by id, so equal scores rank the
// same way every time) and keeps the first limit.
func rankHits(best map[uuid.UUID]SemanticHit, limit int) []SemanticHit {
	hits := make([]SemanticHit, 0, len(best))
	for _, b := range best {
		hits = append(hits, b)
	}
	slices.SortFunc(hits, func(a, b SemanticHit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.StoredEmailID.String(), b.StoredEmailID.String())
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}
