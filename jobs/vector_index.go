package jobs

import "github.com/riverqueue/river"

// VectorIndex is one step of building, or keeping current, the vector
// index of the active embedding profile: a check of what the index needs
// (Generation 0), which trains a generation when the profile has grown
// into one or out of its lists, or one batch moving passages into the
// lists of Generation, committed with the next step. A check that finds
// nothing to do snoozes and comes back as the same row. It carries
// identifiers only.
type VectorIndex struct {
	// Profile is the embedding profile the index is of; a step of another
	// profile's index hands over to a check of the active one.
	Profile int16 `json:"profile"`
	// Generation is the generation this step moves passages into; 0 for a
	// check.
	Generation int16 `json:"generation,omitempty"`
	// Batch numbers the steps of one assignment, from 1.
	Batch int `json:"batch,omitempty"`
}

// Kind implements river.JobArgs.
func (VectorIndex) Kind() string { return "vector_index" }

// InsertOpts implements river.JobArgsWithInsertOpts. Not River-unique: each
// step inserts its successor while it runs; the scheduler keeps one
// pending at a time. Its own queue, so a build of a million passages never
// holds an embedding worker, and River UI shows its steps apart.
func (VectorIndex) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueVectorIndex, MaxAttempts: 1000}
}
