package embedding

import (
	"context"
	"fmt"
)

// Refusal is one text the provider refused for good: its index among the
// texts given to EmbedEach and the status the provider answered it with.
type Refusal struct {
	Index  int
	Status int
}

// EmbedEach is Embed for texts the provider may refuse one by one: it
// returns one vector per text, nil for each text the provider refused,
// the refusals in index order, and the model the answers name (as Embed).
//
// A request the provider refuses for its input (400, 413 or 422; see
// InputRefused) is split in halves, each sent again, down to requests of
// one text: a text refused on its own is a Refusal, and every other text
// gets its vector. Each request runs under the pipeline like Embed's, so
// the pipeline stays the only layer that repeats a request; a split is a
// different request, not a repeat. The extra requests are bounded by the
// depth of the halving, maxIsolationDepth levels below a request of
// MaxInputsPerRequest: one refused text costs at most 2 × 6 = 12 requests
// beyond its request's first, r refused texts at most 12·r, and a request
// of n texts never more than 2n − 1 requests in all (127 for 64).
//
// It does not isolate what refuses the request as a whole — 401, 403, 404
// and the like fail the call as in Embed, as do the repeatable statuses
// once the pipeline has spent its budget on them — and a request of
// several texts whose every text is refused on its own is taken as a
// refusal of the request too (FailureRequestRefused): a provider that
// refuses everything is misconfigured, and recording every text as
// refused would hide that.
func (c *Client) EmbedEach(ctx context.Context, texts []string) ([][]float32, []Refusal, string, error) {
	out := make([][]float32, len(texts))
	var refused []Refusal
	var model string
	for base := 0; base < len(texts); base += MaxInputsPerRequest {
		n := min(len(texts)-base, MaxInputsPerRequest)
		rs, err := c.isolate(ctx, texts[base:base+n], base, out, &model)
		if err != nil {
			return nil, nil, "", err
		}
		if n > 1 && len(rs) == n {
			return nil, nil, "", &AnswerError{Name: FailureRequestRefused,
				Reason: fmt.Sprintf("the provider refused each of a request's %d texts on its own (%d): it refuses the request, not a text", n, rs[0].Status)}
		}
		refused = append(refused, rs...)
	}
	return out, refused, model, nil
}

// isolate embeds texts into out[base:], halving a request the provider
// refuses for its input until the refused texts stand alone, and returns
// their refusals. model is what the answers so far named (sameAnswer).
func (c *Client) isolate(ctx context.Context, texts []string, base int, out [][]float32, model *string) ([]Refusal, error) {
	a, err := c.request(ctx, texts)
	if err == nil {
		if *model, err = sameAnswer(*model, a.model); err != nil {
			return nil, err
		}
		copy(out[base:], a.vectors)
		return nil, nil
	}
	status, ok := InputRefused(err)
	if !ok {
		return nil, err
	}
	if len(texts) == 1 {
		return []Refusal{{Index: base, Status: status}}, nil
	}
	half := len(texts) / 2
	left, err := c.isolate(ctx, texts[:half], base, out, model)
	if err != nil {
		return nil, err
	}
	right, err := c.isolate(ctx, texts[half:], base+half, out, model)
	if err != nil {
		return nil, err
	}
	return append(left, right...), nil
}
