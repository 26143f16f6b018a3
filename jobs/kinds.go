package jobs

// Kinds is every kind of job MailFathom inserts. A kind added to this
// package is added here: the orphan sweep hands back a dead process's
// running jobs of these kinds, and a kind missing from it would stay
// running until River's own stuck-job rescue, an hour later.
var Kinds = []string{
	AccountRun{}.Kind(),
	FolderPass{}.Kind(),
	ReconcileWindow{}.Kind(),
	ExtractionBackfill{}.Kind(),
	MutationStage{}.Kind(),
	Watch{}.Kind(),
	EmbedEmail{}.Kind(),
	EmbeddingBackfill{}.Kind(),
	VectorIndex{}.Kind(),
}
