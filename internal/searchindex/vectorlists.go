package searchindex

import (
	"cmp"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
)

// The shape of a generation of the vector index.
const (
	// MinIndexedPassages is how many passages a profile holds before the
	// index is built: below it a search's full signature scan takes a few
	// milliseconds.
	MinIndexedPassages = 20_000
	// samplePerList is how many sampled vectors train each list. With the
	// lists ListsFor gives, the sample holds 64 times √passages vectors:
	// few topics of the mail are left without a centroid of their own (a
	// topic unsampled is scattered over unrelated lists, and a query of it
	// misses its neighbours).
	samplePerList = 16
	// trainingRounds is how many k-means rounds a generation is trained
	// with.
	trainingRounds = 6
	// heldOutVectors is how many sampled vectors beyond the training
	// sample are drawn to set a generation's outlier threshold: vectors
	// the lists were not trained on lie farther from them than the
	// training sample does, as every passage written later will.
	heldOutVectors = 4096
	// outlierLists is how many lists' worth of passages, on average, a
	// generation's outlier list is set to hold: at most 1 % of them.
	// Measured on vectors the lists were not trained on, a search probing
	// 8 lists then reads a quarter more codes, and a passage unlike the
	// mail the lists were trained on (the test embedder's probe phrase
	// among its synthetic mail: 0.14–0.35 similar to its nearest
	// centroid, against 0.70 for the least similar in a thousand of
	// 20 000 synthetic passages) is in it.
	outlierLists = 2
	// minShortlist is the fewest centroids compared exactly when a
	// passage is assigned its nearest: the centroids whose signatures
	// differ least from the passage's.
	minShortlist = 32
)

// ListsFor is how many lists a generation trained on n passages has: four
// times the square root of n, at least 16 and at most 65 535 (a list then
// holds a quarter of the square root: 79 passages at 100 000, 250 at a
// million). Measured on the package's benchmark, √n lists held several
// neighbouring topics each, and a topic's passages were scattered over
// lists far from its queries: recall@10 was 0.70 at 100 000 passages of
// 10 000 overlapping topics with 8 lists probed, against 0.96 with 4√n.
func ListsFor(n int64) int {
	return min(max(int(math.Round(4*math.Sqrt(float64(n)))), 16), 65535)
}

// centroids are a generation's lists: centroid i is list number i+1.
type centroids struct {
	vecs [][]float32
	// sigs holds the centroids' signatures one after another, words
	// machine words each.
	sigs  []uint64
	words int
}

func newCentroids(vecs [][]float32) *centroids {
	c := &centroids{vecs: vecs}
	if len(vecs) > 0 {
		c.words = (len(vecs[0]) + 63) / 64
	}
	c.sigs = make([]uint64, 0, c.words*len(vecs))
	for _, v := range vecs {
		c.sigs = append(c.sigs, newSignBits(v)...)
	}
	return c
}

// shortlist is how many centroids nearest compares exactly: a sixty-fourth
// of them, at least minShortlist.
func (c *centroids) shortlist() int {
	return min(len(c.vecs), max(minShortlist, len(c.vecs)/64))
}

// nearest returns the index of v's nearest centroid (the largest dot
// product) among the shortlist of those whose signatures differ least
// from sig, v's. Away from the boundary between two lists — a passage
// near no centroid — the shortlist always holds the nearest, and there
// either list is as good.
func (c *centroids) nearest(v []float32, sig signBits) int {
	k := c.shortlist()
	if k == len(c.vecs) {
		return c.nearestExact(v)
	}
	type near struct{ d, i int }
	short := make([]near, 0, k)
	worst := math.MaxInt
	sig = sig[:c.words]
	for i := range len(c.vecs) {
		cs := c.sigs[i*c.words : (i+1)*c.words : (i+1)*c.words]
		d := 0
		for j, w := range sig {
			d += bits.OnesCount64(w ^ cs[j])
		}
		if d >= worst {
			continue
		}
		// Insert in order, dropping the farthest once the shortlist is
		// full.
		j := len(short)
		if j < k {
			short = append(short, near{})
		} else {
			j = k - 1
		}
		for j > 0 && short[j-1].d > d {
			short[j] = short[j-1]
			j--
		}
		short[j] = near{d, i}
		if len(short) == k {
			worst = short[k-1].d
		}
	}
	best, at := float32(math.Inf(-1)), 0
	for _, s := range short {
		if d := dotFloats(v, c.vecs[s.i]); d > best {
			best, at = d, s.i
		}
	}
	return at
}

// ranked returns the centroids' indexes by their dot product with q,
// largest first (ties by index): the order a query probes the lists in.
func (c *centroids) ranked(q []float32) []int {
	ds := make([]float32, len(c.vecs))
	order := make([]int, len(c.vecs))
	for i, cv := range c.vecs {
		ds[i] = dotFloats(q, cv)
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(ds[b], ds[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}

// assignAll returns each vector's nearest centroid, on every core.
func (c *centroids) assignAll(vs [][]float32) []int {
	out := make([]int, len(vs))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(vs)/256))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(vs); i += workers {
				out[i] = c.nearest(vs[i], newSignBits(vs[i]))
			}
		})
	}
	wg.Wait()
	return out
}

// nearestExact returns the index of v's nearest centroid (the largest dot
// product) among all of them: what nearest approximates through its
// shortlist. It costs a dot product per centroid, which an embed job's
// few hundred vectors afford and a build of millions does not.
func (c *centroids) nearestExact(v []float32) int {
	best, at := float32(math.Inf(-1)), 0
	for i, cv := range c.vecs {
		if d := dotFloats(v, cv); d > best {
			best, at = d, i
		}
	}
	return at
}

// trainCentroids runs spherical k-means over sample for k centroids: it
// starts from k sample vectors drawn by seed and for trainingRounds
// rounds assigns every sample vector its nearest centroid and moves each
// centroid to the normalized mean of its vectors; a centroid left with
// none starts again from a sample vector. The same sample and seed train
// the same centroids. The sample must hold at least k vectors of one
// length.
func trainCentroids(sample [][]float32, k int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, uint64(len(sample))))
	dims := len(sample[0])
	vecs := make([][]float32, k)
	for i, p := range rng.Perm(len(sample))[:k] {
		vecs[i] = slices.Clone(sample[p])
	}
	sums := make([][]float64, k)
	for i := range sums {
		sums[i] = make([]float64, dims)
	}
	counts := make([]int, k)
	for range trainingRounds {
		assigned := newCentroids(vecs).assignAll(sample)
		for i := range sums {
			clear(sums[i])
			counts[i] = 0
		}
		for i, a := range assigned {
			counts[a]++
			s := sums[a]
			for d, x := range sample[i] {
				s[d] += float64(x)
			}
		}
		for i := range vecs {
			if counts[i] == 0 {
				vecs[i] = slices.Clone(sample[rng.IntN(len(sample))])
				continue
			}
			var norm float64
			for _, x := range sums[i] {
				norm += x * x
			}
			norm = math.Sqrt(norm)
			if norm == 0 {
				continue
			}
			for d, x := range sums[i] {
				vecs[i][d] = float32(x / norm)
			}
		}
	}
	return vecs
}

// outlierThreshold returns the similarity below which a passage is an
// outlier of c, which has k lists: the similarity to its nearest
// centroid of the held vector at the outlierLists/k quantile (at most
// the 1 % one), so about that share of passages like held falls below
// it. Similarities are measured through the shortlist, as a build
// assigns; an embed job's exact assignment can only find a passage more
// similar. For no held vectors it is -Inf: no outlier list.
func outlierThreshold(c *centroids, held [][]float32) float32 {
	if len(held) == 0 {
		return float32(math.Inf(-1))
	}
	sims := make([]float32, len(held))
	for i, n := range c.assignAll(held) {
		sims[i] = dotFloats(held[i], c.vecs[n])
	}
	slices.Sort(sims)
	share := min(float64(outlierLists)/float64(len(c.vecs)), 0.01)
	return sims[int(share*float64(len(sims)))]
}
