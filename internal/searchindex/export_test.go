package searchindex

import "context"

// WriteVectorsAs is VectorIndex.WriteVectors by a writer that read
// generation number as the newest before it wrote.
func (ix *VectorIndex) WriteVectorsAs(ctx context.Context, q Querier, profile, number int16, vs []PassageVector) (int, error) {
	g, err := ix.generation(ctx, q, profile, number)
	if err != nil {
		return 0, err
	}
	return writeVectors(ctx, q, profile, vs, g)
}
