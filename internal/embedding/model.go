package embedding

import "strings"

// SameModel reports whether two model names a provider answered name the
// same model: equal, or equal but for Ollama's default tag — Ollama
// resolves a name without a tag to name:latest, and answers either
// spelling depending on how the model was asked for and pulled. It
// deliberately accepts nothing else: another tag (name:v1.5), an owner
// prefix (BAAI/name) or a version suffix names what may be another
// model, and whether it is cannot be told from the names.
func SameModel(a, b string) bool {
	return strings.TrimSuffix(a, ":latest") == strings.TrimSuffix(b, ":latest")
}
