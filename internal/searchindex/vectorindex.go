package searchindex

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// VectorIndex is one process's copy of the centroids of the live
// generations of every profile's vector index (vector_index_lists). The
// index itself — which generation serves, which list every passage is in —
// is read from PostgreSQL by every search and every write, so replicas
// answer alike; only the centroids, which never change once a generation
// is trained, are kept here, and a generation no longer live is dropped
// the next time its profile's index is read. The zero value is not
// usable: NewVectorIndex. It is safe for concurrent use.
type VectorIndex struct {
	mu   sync.Mutex
	gens map[generationKey]*generation
	// newest holds, per profile, the newest generation a write read and
	// when: writes reuse it for writeViewAge.
	newest map[int16]newestRead
	now    func() time.Time
}

// newestRead is the newest generation of a profile's index, as read at.
type newestRead struct {
	number int16
	at     time.Time
}

// writeViewAge is how long writes put passages in the lists of the
// newest generation they last read before they read it again. A write
// into a generation that is no longer the newest (a build began
// meanwhile) leaves its passages pending, for the build to assign, so a
// write never needs the index read anew; reading it once a few seconds
// spares every embed job a statement.
const writeViewAge = 10 * time.Second

// NewVectorIndex returns an empty VectorIndex.
func NewVectorIndex() *VectorIndex {
	return &VectorIndex{gens: map[generationKey]*generation{}, newest: map[int16]newestRead{}, now: time.Now}
}

type generationKey struct{ profile, number int16 }

// generation is one trained set of lists: list number i+1's centroid is
// lists.vecs[i]. List number 0 holds its outliers: the passages less
// similar than outlierBelow to their nearest centroid, which every search
// reads.
type generation struct {
	number       int16
	lists        *centroids
	outlierBelow float32
}

// listID is the list_id of the generation's list at index i.
func (g *generation) listID(i int) int32 { return int32(g.number)<<16 | int32(i+1) }

// outlierList is the list_id of the generation's outlier list.
func (g *generation) outlierList() int32 { return firstListID(g.number) }

// listFor is the list_id v goes into given its nearest centroid: that
// centroid's list, or the outlier list when v is less similar to it than
// outlierBelow. A query near such a passage need not rank its nearest
// centroid among those it probes (every centroid is about as far from
// both), so the outlier list, read by every search, is where it is found.
func (g *generation) listFor(v []float32, nearest int) int32 {
	if dotFloats(v, g.lists.vecs[nearest]) < g.outlierBelow {
		return g.outlierList()
	}
	return g.listID(nearest)
}

// firstListID is the lowest list_id of generation number: every list of an
// older generation, and the pending list, are below it.
func firstListID(number int16) int32 { return int32(number) << 16 }

// indexView is a profile's index as one statement read it: the serving and
// the building generation, nil for none.
type indexView struct {
	serving, building *generation
}

// newest is the generation new passages go into: the one being built, or
// else the serving one; nil without an index.
func (v indexView) newest() *generation {
	if v.building != nil {
		return v.building
	}
	return v.serving
}

// live returns the view's generations, serving first.
func (v indexView) live() []*generation {
	var out []*generation
	for _, g := range []*generation{v.serving, v.building} {
		if g != nil {
			out = append(out, g)
		}
	}
	return out
}

// view returns the profile's index, the generations' centroids loaded
// (from this VectorIndex when it holds them), given the serving and
// building generation numbers a statement read.
func (ix *VectorIndex) view(ctx context.Context, q Querier, profile, serving, building int16) (indexView, error) {
	ix.forget(profile, serving, building)
	var v indexView
	var err error
	if v.serving, err = ix.generation(ctx, q, profile, serving); err != nil {
		return indexView{}, err
	}
	if v.building, err = ix.generation(ctx, q, profile, building); err != nil {
		return indexView{}, err
	}
	return v, nil
}

// readView reads the profile's index.
func (ix *VectorIndex) readView(ctx context.Context, q Querier, profile int16) (indexView, error) {
	var serving, building int16
	err := q.QueryRow(ctx, `
		SELECT coalesce(i.serving, 0), coalesce(i.building, 0)
		FROM (SELECT) AS one LEFT JOIN vector_indexes i ON i.profile_id = $1`, profile).Scan(&serving, &building)
	if err != nil {
		return indexView{}, fmt.Errorf("searchindex: read the vector index: %w", err)
	}
	return ix.view(ctx, q, profile, serving, building)
}

// forget drops the profile's cached generations other than the live ones.
func (ix *VectorIndex) forget(profile int16, live ...int16) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for k := range ix.gens {
		if k.profile == profile && k.number != live[0] && k.number != live[1] {
			delete(ix.gens, k)
		}
	}
}

// generation returns generation number of the profile, reading its
// centroids once; nil for number 0 or a generation with no lists (one
// removed since the caller read its number).
func (ix *VectorIndex) generation(ctx context.Context, q Querier, profile, number int16) (*generation, error) {
	if number == 0 {
		return nil, nil
	}
	key := generationKey{profile, number}
	ix.mu.Lock()
	g, ok := ix.gens[key]
	ix.mu.Unlock()
	if ok {
		return g, nil
	}
	rows, err := q.Query(ctx, `
		SELECT l.centroid, g.outlier_below
		FROM vector_index_lists l
		JOIN vector_index_generations g ON g.profile_id = l.profile_id AND g.generation = l.generation
		WHERE l.profile_id = $1 AND l.generation = $2 ORDER BY l.list_no`, profile, number)
	if err != nil {
		return nil, fmt.Errorf("searchindex: read the vector index's centroids: %w", err)
	}
	var vecs [][]float32
	var raw []byte
	var below float32
	_, err = pgx.ForEachRow(rows, []any{&raw, &below}, func() error {
		v, err := DecodeVector(raw)
		vecs = append(vecs, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("searchindex: read the vector index's centroids: %w", err)
	}
	if len(vecs) == 0 {
		return nil, nil
	}
	g = &generation{number: number, lists: newCentroids(vecs), outlierBelow: below}
	ix.mu.Lock()
	ix.gens[key] = g
	ix.mu.Unlock()
	return g, nil
}

// WriteVectors is the package's WriteVectors that also puts each vector
// in its nearest list of the newest generation of the profile's index (the
// one being built, else the serving one), as read within writeViewAge: a
// passage is found through the lists from its first search on. Without an
// index, or should a build have begun since the index was read, the
// passages are pending, which every search scans, until the index's next
// step assigns them.
func (ix *VectorIndex) WriteVectors(ctx context.Context, q Querier, profile int16, vs []PassageVector) (int, error) {
	if len(vs) == 0 {
		return 0, nil
	}
	g, err := ix.newestGeneration(ctx, q, profile)
	if err != nil {
		return 0, err
	}
	return writeVectors(ctx, q, profile, vs, g)
}

// newestGeneration returns the newest generation of the profile's index
// (nil for none) as read at most writeViewAge ago.
func (ix *VectorIndex) newestGeneration(ctx context.Context, q Querier, profile int16) (*generation, error) {
	ix.mu.Lock()
	read, ok := ix.newest[profile]
	ix.mu.Unlock()
	if !ok || ix.now().Sub(read.at) >= writeViewAge {
		v, err := ix.readView(ctx, q, profile)
		if err != nil {
			return nil, err
		}
		read = newestRead{at: ix.now()}
		if g := v.newest(); g != nil {
			read.number = g.number
		}
		ix.mu.Lock()
		ix.newest[profile] = read
		ix.mu.Unlock()
	}
	return ix.generation(ctx, q, profile, read.number)
}

// assignLists returns each vector's list_id in g (0 for every one when g
// is nil), on every core, through the centroids' shortlist: how a build
// assigns millions of passages in minutes.
func assignLists(g *generation, vecs [][]float32) []int32 {
	out := make([]int32, len(vecs))
	if g == nil {
		return out
	}
	for i, n := range g.lists.assignAll(vecs) {
		out[i] = g.listFor(vecs[i], n)
	}
	return out
}

// assignListsExact is assignLists comparing every centroid: what a few
// vectors written at a time (an embed job's) get. A new passage is then in
// the list a query near it probes first, however little its signature
// tells of its direction (a profile of few dimensions, mail unlike the
// sample the lists were trained on); through the shortlist it could land
// in a list no query near it probes.
func assignListsExact(g *generation, vecs [][]float32) []int32 {
	out := make([]int32, len(vecs))
	if g == nil {
		return out
	}
	for i, v := range vecs {
		out[i] = g.listFor(v, g.lists.nearestExact(v))
	}
	return out
}

// codesOf returns each vector's code, on every core.
func codesOf(vecs [][]float32) [][]byte {
	out := make([][]byte, len(vecs))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(vecs)/1024))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(vecs); i += workers {
				out[i] = EncodeCode(vecs[i])
			}
		})
	}
	wg.Wait()
	return out
}

// passageKey names one passage of one message.
type passageKey struct {
	id      uuid.UUID
	ordinal int16
}
