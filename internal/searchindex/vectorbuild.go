package searchindex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// When a serving generation is trained again.
const (
	// retrainGrowth: once the profile holds this many times the passages
	// its serving generation was trained on, the next generation, with
	// more lists, is trained.
	retrainGrowth = 4
	// imbalance: once the largest list holds this many times the mean,
	// after the mail grew by half since training, the next generation is
	// trained. Fresh k-means lists measured up to three times the mean.
	imbalance = 8
)

// IndexStep is what a profile's vector index needs next.
type IndexStep int

// The steps of the vector index.
const (
	// IndexCurrent: nothing; every passage is in a list of the serving
	// generation, or the profile has too few passages for an index.
	IndexCurrent IndexStep = iota
	// IndexTrain: train the next generation (TrainGeneration,
	// BeginGeneration).
	IndexTrain
	// IndexAssign: move passages into the lists of IndexStatus.Target
	// (VectorIndex.AssignBatch, FinishGeneration).
	IndexAssign
)

func (s IndexStep) String() string {
	switch s {
	case IndexTrain:
		return "train"
	case IndexAssign:
		return "assign"
	}
	return "current"
}

// IndexStatus is a profile's vector index as ReadIndexStatus found it.
type IndexStatus struct {
	Profile    int16
	Dimensions int
	// Serving and Building are the generations searches probe and the one
	// being built (0 for none); Trained the newest trained.
	Serving, Building, Trained int16
	// ServingLists and ServingPassages are the serving generation's list
	// count and the passages it was trained on.
	ServingLists    int
	ServingPassages int64
	// Passages counts the profile's passages with vectors; Pending those
	// in no live generation's list (the pending list, and a generation
	// replaced while an embed job wrote into it); Outside those not in a
	// list of the newest generation (pending included); and LargestList
	// the serving generation's largest list, its outlier list included
	// (mail unlike what the lists were trained on gathers there, and
	// every search reads it, so it too calls for training again).
	Passages, Pending, Outside, LargestList int64
}

// ReadIndexStatus reads the profile's vector index and counts its lists'
// passages: one scan of the profile's range of the lists index.
func ReadIndexStatus(ctx context.Context, q Querier, profile int16) (IndexStatus, error) {
	s := IndexStatus{Profile: profile}
	err := q.QueryRow(ctx, `
		SELECT p.dimensions, coalesce(i.serving, 0), coalesce(i.building, 0), coalesce(i.trained, 0),
		       coalesce(g.lists, 0), coalesce(g.passages, 0)
		FROM embedding_profiles p
		LEFT JOIN vector_indexes i ON i.profile_id = p.id
		LEFT JOIN vector_index_generations g ON g.profile_id = p.id AND g.generation = i.serving
		WHERE p.id = $1`, profile).Scan(&s.Dimensions, &s.Serving, &s.Building, &s.Trained, &s.ServingLists, &s.ServingPassages)
	if err != nil {
		return IndexStatus{}, fmt.Errorf("searchindex: read the vector index's status: %w", err)
	}
	rows, err := q.Query(ctx, `SELECT list_id, count(*) FROM passage_signatures WHERE profile_id = $1 GROUP BY list_id`, profile)
	if err != nil {
		return IndexStatus{}, fmt.Errorf("searchindex: count the vector index's lists: %w", err)
	}
	newest, oldest := firstListID(max(s.Serving, s.Building)), oldestLive(s.Serving, s.Building)
	var list int32
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&list, &n}, func() error {
		s.Passages += n
		if list < oldest {
			s.Pending += n
		}
		if list < newest || newest == 0 {
			s.Outside += n
		}
		if s.Serving > 0 && int16(list>>16) == s.Serving {
			s.LargestList = max(s.LargestList, n)
		}
		return nil
	})
	if err != nil {
		return IndexStatus{}, fmt.Errorf("searchindex: count the vector index's lists: %w", err)
	}
	return s, nil
}

// Next returns what the index needs: a build under way goes on; a
// profile without an index gets one once it holds MinIndexedPassages;
// a serving generation is trained again when the mail has grown
// retrainGrowth-fold since (and more lists are due), or its largest list
// holds imbalance times the mean after the mail grew by half; pending
// passages are assigned. A profile of more than MaxCodedDimensions has no
// index.
func (s IndexStatus) Next() IndexStep {
	switch {
	case s.Dimensions > MaxCodedDimensions:
		return IndexCurrent
	case s.Building > 0:
		return IndexAssign
	case s.Serving == 0:
		if s.Passages >= MinIndexedPassages {
			return IndexTrain
		}
		return IndexCurrent
	case s.Passages >= retrainGrowth*s.ServingPassages && ListsFor(s.Passages) > s.ServingLists:
		return IndexTrain
	case 2*s.Passages >= 3*s.ServingPassages && s.LargestList > imbalance*max(1, s.Passages/int64(max(1, s.ServingLists))):
		return IndexTrain
	case s.Pending > 0:
		return IndexAssign
	}
	return IndexCurrent
}

// Target is the generation IndexAssign moves passages into: the one being
// built, else the serving one.
func (s IndexStatus) Target() int16 { return max(s.Building, s.Serving) }

// oldestLive is the lowest list_id of the oldest live generation: every
// passage below it is in no live generation's list. Without one, 1 (the
// pending list alone).
func oldestLive(serving, building int16) int32 {
	switch {
	case serving > 0 && building > 0:
		return firstListID(min(serving, building))
	case serving > 0 || building > 0:
		return firstListID(max(serving, building))
	}
	return 1
}

// TrainedGeneration is a generation's centroids, trained and not yet
// recorded.
type TrainedGeneration struct {
	Profile   int16
	Passages  int64
	Centroids [][]float32
	// OutlierBelow is the similarity to its nearest centroid below which
	// a passage goes into the generation's outlier list, which every
	// search reads. -Inf keeps none apart; the zero value keeps apart
	// only passages pointing away from every centroid.
	OutlierBelow float32
}

// TrainGeneration trains the next generation of the profile's index, which
// holds passages passages: ListsFor(passages) lists, k-means over a sample
// of up to 16 vectors a list drawn by page (TABLESAMPLE SYSTEM, REPEATABLE
// by the generation's number, so the same vectors train the same lists),
// and the outlier threshold set on up to 4 096 more sampled vectors the
// lists were not trained on (for a profile too small to spare them, on
// none: no outlier list). It writes nothing and holds no transaction; at
// a million passages the sample is about 100 MB of vectors and the
// training a few seconds of every core.
func TrainGeneration(ctx context.Context, q Querier, s IndexStatus) (*TrainedGeneration, error) {
	return TrainGenerationWith(ctx, q, s, ListsFor(s.Passages))
}

// TrainGenerationWith is TrainGeneration training k lists (1 to 65 535),
// for comparing list counts.
func TrainGenerationWith(ctx context.Context, q Querier, s IndexStatus, k int) (*TrainedGeneration, error) {
	if s.Passages <= 0 {
		return nil, errors.New("searchindex: train a generation: the profile has no passages")
	}
	if k < 1 || k > 65535 {
		return nil, fmt.Errorf("searchindex: train a generation: %d lists", k)
	}
	want := min(s.Passages, int64(k)*samplePerList+heldOutVectors)
	pct := min(100, 150*float64(want)/float64(s.Passages))
	var sample [][]float32
	for {
		rows, err := q.Query(ctx, `
			SELECT v.vector FROM passage_vectors v TABLESAMPLE SYSTEM ($2) REPEATABLE ($3)
			WHERE v.profile_id = $1 LIMIT $4`, s.Profile, pct, int(s.Trained)+1, want)
		if err != nil {
			return nil, fmt.Errorf("searchindex: sample vectors: %w", err)
		}
		sample = sample[:0]
		var raw []byte
		_, err = pgx.ForEachRow(rows, []any{&raw}, func() error {
			v, err := DecodeVector(raw)
			if err == nil && len(v) == s.Dimensions {
				sample = append(sample, v)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("searchindex: sample vectors: %w", err)
		}
		if len(sample) >= k || pct >= 100 {
			break
		}
		pct = 100
	}
	if len(sample) == 0 {
		return nil, errors.New("searchindex: train a generation: no vector of the profile's dimensions")
	}
	// Drawn by page, the sample is in table order: shuffled, the vectors
	// held out are drawn from every page sampled, not from the last.
	seed := uint64(s.Profile)<<16 | uint64(s.Trained+1)
	rand.New(rand.NewPCG(seed, 0)).Shuffle(len(sample), func(i, j int) { sample[i], sample[j] = sample[j], sample[i] })
	train, held := sample[:min(len(sample), k*samplePerList)], sample[min(len(sample), k*samplePerList):]
	k = min(k, len(train))
	centroids := trainCentroids(train, k, seed)
	return &TrainedGeneration{Profile: s.Profile, Passages: s.Passages, Centroids: centroids,
		OutlierBelow: outlierThreshold(newCentroids(centroids), held)}, nil
}

// BeginGeneration records t as the profile's next generation, the one
// being built, in tx, and returns its number; it refuses while another is
// being built. Embed jobs see it as the newest from then on and write
// into its lists, or pending.
func BeginGeneration(ctx context.Context, tx pgx.Tx, t *TrainedGeneration) (int16, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO vector_indexes (profile_id) VALUES ($1) ON CONFLICT (profile_id) DO NOTHING`, t.Profile); err != nil {
		return 0, fmt.Errorf("searchindex: begin a generation: %w", err)
	}
	var trained, building int16
	err := tx.QueryRow(ctx, `SELECT trained, building FROM vector_indexes WHERE profile_id = $1 FOR UPDATE`, t.Profile).Scan(&trained, &building)
	if err != nil {
		return 0, fmt.Errorf("searchindex: begin a generation: %w", err)
	}
	if building != 0 {
		return 0, fmt.Errorf("searchindex: begin a generation: generation %d is being built", building)
	}
	if trained == 32767 {
		return 0, errors.New("searchindex: begin a generation: the profile has used every generation number")
	}
	number := trained + 1
	vecs := make([][]byte, len(t.Centroids))
	for i, c := range t.Centroids {
		vecs[i] = EncodeVector(c)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO vector_index_generations (profile_id, generation, lists, passages, outlier_below) VALUES ($1, $2, $3, $4, $5)`,
		t.Profile, number, len(t.Centroids), t.Passages, t.OutlierBelow); err != nil {
		return 0, fmt.Errorf("searchindex: begin a generation: %w", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO vector_index_lists (profile_id, generation, list_no, centroid)
		SELECT $1, $2, n, c FROM unnest($3::bytea[]) WITH ORDINALITY AS l(c, n)`, t.Profile, number, vecs); err != nil {
		return 0, fmt.Errorf("searchindex: begin a generation: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE vector_indexes SET building = $2, trained = $2 WHERE profile_id = $1`, t.Profile, number); err != nil {
		return 0, fmt.Errorf("searchindex: begin a generation: %w", err)
	}
	return number, nil
}

// ErrGenerationGone is an assignment into a generation that is no longer
// live: a newer one replaced it, or its profile was pruned.
var ErrGenerationGone = errors.New("searchindex: the vector index's generation is no longer live")

// AssignBatch moves, in tx, at most limit of the profile's passages that
// are in no list of generation number — pending, or in an older
// generation's list — into their nearest list of it, writing each one's
// code and the copies of its message's folder and sending date (read as it
// writes them, so a message relocated meanwhile is copied where it is
// now), and returns how many it moved. The batch's state is in its rows: a
// batch that did not commit is simply done again.
func (ix *VectorIndex) AssignBatch(ctx context.Context, tx pgx.Tx, profile, number int16, limit int) (int, error) {
	g, err := ix.generation(ctx, tx, profile, number)
	if err != nil {
		return 0, err
	}
	if g == nil {
		return 0, ErrGenerationGone
	}
	rows, err := tx.Query(ctx, `
		SELECT s.stored_email_id, s.ordinal, v.vector
		FROM passage_signatures s
		JOIN passage_vectors v ON v.stored_email_id = s.stored_email_id AND v.ordinal = s.ordinal AND v.profile_id = s.profile_id
		WHERE s.profile_id = $1 AND s.list_id < $2
		LIMIT $3`, profile, firstListID(number), limit)
	if err != nil {
		return 0, fmt.Errorf("searchindex: assign passages to lists: %w", err)
	}
	var (
		ids  []uuid.UUID
		ords []int16
		vecs [][]float32
		id   uuid.UUID
		ord  int16
		raw  []byte
	)
	dims := len(g.lists.vecs[0])
	_, err = pgx.ForEachRow(rows, []any{&id, &ord, &raw}, func() error {
		v, err := DecodeVector(raw)
		if err != nil {
			return err
		}
		if len(v) != dims {
			return fmt.Errorf("searchindex: a vector of %d dimensions under a profile of %d", len(v), dims)
		}
		ids, ords, vecs = append(ids, id), append(ords, ord), append(vecs, v)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("searchindex: assign passages to lists: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	lists := assignLists(g, vecs)
	codes := codesOf(vecs)
	// In list order, so the lists index's new entries go in one range
	// after another rather than all over it.
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(lists[a], lists[b]) })
	ids, ords, lists, codes = permute(ids, order), permute(ords, order), permute(lists, order), permute(codes, order)
	if _, err := tx.Exec(ctx, `
		UPDATE passage_signatures s SET list_id = n.l, code = n.c, mail_folder_id = e.mail_folder_id, sent_at = e.sent_at
		FROM unnest($2::uuid[], $3::smallint[], $4::integer[], $5::bytea[]) AS n(id, o, l, c)
		JOIN stored_emails e ON e.id = n.id
		WHERE s.profile_id = $1 AND s.stored_email_id = n.id AND s.ordinal = n.o`,
		profile, ids, ords, lists, codes); err != nil {
		return 0, fmt.Errorf("searchindex: assign passages to lists: %w", err)
	}
	return len(ids), nil
}

// FinishGeneration makes generation number the serving one, in tx, once
// none of the profile's passages is outside its lists, and drops the
// older generations' centroids; it reports whether number now serves (a
// serving generation whose pending passages are all assigned does too).
// It reports false, doing nothing, while passages remain outside, and
// for a generation no longer live. An embed job that read the older
// generation as the newest before the build began may commit into its
// lists after this: searches read such a passage as pending, and the
// next check assigns it.
func FinishGeneration(ctx context.Context, tx pgx.Tx, profile, number int16) (bool, error) {
	var serving, building int16
	err := tx.QueryRow(ctx, `SELECT serving, building FROM vector_indexes WHERE profile_id = $1 FOR UPDATE`, profile).Scan(&serving, &building)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("searchindex: finish a generation: %w", err)
	}
	if serving != number && building != number {
		return false, nil
	}
	var outside bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM passage_signatures WHERE profile_id = $1 AND list_id < $2)`,
		profile, firstListID(number)).Scan(&outside); err != nil {
		return false, fmt.Errorf("searchindex: finish a generation: %w", err)
	}
	if outside {
		return false, nil
	}
	if building == number {
		if _, err := tx.Exec(ctx, `UPDATE vector_indexes SET serving = $2, building = 0 WHERE profile_id = $1`, profile, number); err != nil {
			return false, fmt.Errorf("searchindex: finish a generation: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM vector_index_generations WHERE profile_id = $1 AND generation <> $2`, profile, number); err != nil {
		return false, fmt.Errorf("searchindex: finish a generation: %w", err)
	}
	return true, nil
}

// VacuumLists vacuums and analyzes the signature rows the lists index
// covers, outside any transaction: once their pages are all-visible a
// probe reads the moved passages' codes from the index alone, without
// visiting the rows. Autovacuum gets there too, later.
func VacuumLists(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, `VACUUM (ANALYZE) passage_signatures`); err != nil {
		return fmt.Errorf("searchindex: vacuum the vector index: %w", err)
	}
	return nil
}

// permute returns xs reordered: element i of the result is xs[order[i]].
func permute[T any](xs []T, order []int) []T {
	out := make([]T, len(xs))
	for i, at := range order {
		out[i] = xs[at]
	}
	return out
}
