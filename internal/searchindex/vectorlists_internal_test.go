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
