package searchindex

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randomUnit(rng *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return normalized(v)
}

func normalized(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(n))
	}
	return v
}

// BenchmarkNearest times assigning one 384-dimension vector its nearest of
// 4 000 centroids, the lists a generation of a million passages has: the
// cost, per passage, of an embed job's and a build step's assignment.
//
//	go test ./internal/searchindex/ -run XX -bench Nearest
func BenchmarkNearest(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := make([][]float32, 4000)
	for i := range vecs {
		vecs[i] = randomUnit(rng, 384)
	}
	c := newCentroids(vecs)
	v := randomUnit(rng, 384)
	sig := newSignBits(v)
	for b.Loop() {
		c.nearest(v, sig)
	}
}

// BenchmarkNearestExact is BenchmarkNearest comparing every centroid, as
// an embed job's writes do.
func BenchmarkNearestExact(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := make([][]float32, 4000)
	for i := range vecs {
		vecs[i] = randomUnit(rng, 384)
	}
	c := newCentroids(vecs)
	v := randomUnit(rng, 384)
	for b.Loop() {
		c.nearestExact(v)
	}
}

// TestAWrittenPassageGoesToItsNearestList: what an embed job writes goes
// to the list of its nearest centroid, whatever its signature says: with
// centroids that carry little structure, as a profile of few dimensions
// gives, the shortlist misses the nearest for many.
func TestAWrittenPassageGoesToItsNearestList(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	const dims, lists = 64, 600
	vecs := make([][]float32, lists)
	for i := range vecs {
		vecs[i] = randomUnit(rng, dims)
	}
	g := &generation{number: 1, lists: newCentroids(vecs)}
	written := make([][]float32, 500)
	for i := range written {
		written[i] = randomUnit(rng, dims)
	}
	missed := 0
	for i, id := range assignListsExact(g, written) {
		best, at := float32(math.Inf(-1)), 0
		for j, c := range vecs {
			if d := dotFloats(written[i], c); d > best {
				best, at = d, j
			}
		}
		if id != g.listID(at) {
			missed++
		}
	}
	if missed > 0 {
		t.Fatalf("%d of %d written passages are not in their nearest list", missed, len(written))
	}
	shortlisted := 0
	for i, id := range assignLists(g, written) {
		if id != assignListsExact(g, written[i:i+1])[0] {
			shortlisted++
		}
	}
	t.Logf("through the shortlist, %d of %d would have gone to another list", shortlisted, len(written))
}

// TestOutlierThreshold: about outlierLists lists' worth of vectors like
// the held ones fall below the threshold (at most 1 %), and with none held
// there is no outlier list.
func TestOutlierThreshold(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	vecs := make([][]float32, 400)
	for i := range vecs {
		vecs[i] = randomUnit(rng, 32)
	}
	c := newCentroids(vecs)
	if got := outlierThreshold(c, nil); !math.IsInf(float64(got), -1) {
		t.Fatalf("no held vectors: threshold %v, want -Inf", got)
	}
	held := make([][]float32, 20000)
	for i := range held {
		held[i] = randomUnit(rng, 32)
	}
	below := outlierThreshold(c, held)
	n := 0
	for _, v := range held {
		if dotFloats(v, c.vecs[c.nearest(v, newSignBits(v))]) < below {
			n++
		}
	}
	// 2/400 of 20 000 is 100, measured as a build assigns: through the
	// shortlist.
	if n < 95 || n > 105 {
		t.Fatalf("%d of %d held vectors below the threshold, want about 100", n, len(held))
	}
}
