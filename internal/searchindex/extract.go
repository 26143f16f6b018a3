package searchindex

import (
	"github.com/google/uuid"

	"github.com/mailfathom/mailfathom/mimex"
)

// Extract reads one stored payload with mimex under lim and returns the
// record Write stores for the stored email id: the metadata, the
// classification markers, the body text and its passages. The forward pass calls it on
// the payload it just fetched, the extraction backfill on raw MIME an
// earlier run stored; neither reaches a mail server through it. A payload
// no reader can parse yields a record with Readable false and its
// Failure named, never an error.
func Extract(id uuid.UUID, raw []byte, lim mimex.Limits) Record {
	res := mimex.Extract(raw, lim)
	rec := Record{StoredEmailID: id, Readable: res.Readable, Failure: string(res.Failure)}
	if !res.Readable {
		return rec
	}
	rec.SentAt, rec.ReceivedAt = res.SentAt, res.ReceivedAt
	rec.Subject, rec.MessageID = res.Subject, res.MessageID
	rec.InReplyTo, rec.References = res.InReplyTo, res.References
	for _, p := range res.Participants {
		rec.Participants = append(rec.Participants, Participant{
			Role: string(p.Role), Address: p.Address, Comparison: p.Comparison, DisplayName: p.DisplayName,
		})
	}
	s := res.Attachments
	rec.AttachmentCount, rec.AttachmentDecodedBytes, rec.InlineResourceCount = s.Count, s.TotalDecodedSize, s.InlineResourceCount
	rec.Encrypted, rec.UnverifiedSignature, rec.TNEF = s.Encrypted, s.UnverifiedSignature, s.TNEF
	for _, a := range s.Items {
		rec.Attachments = append(rec.Attachments, Attachment{
			MediaType: a.MediaType, Disposition: a.Disposition, FileName: a.FileName,
			FileNameRepaired: a.FileNameRepaired, TNEFUnexpanded: a.TNEFUnexpanded, DecodedBytes: a.DecodedSize,
		})
	}
	switch res.Body.State {
	case mimex.BodyText:
		rec.TextSource = SourcePlainText
		if res.Body.Lossy {
			rec.TextSource = SourceHTMLDerived
		}
	case mimex.BodyEncrypted:
		rec.TextSource = SourceEncrypted
	case mimex.BodyNoTextualBody:
		rec.TextSource = SourceNoTextualBody
	default:
		rec.TextSource = SourceNotExtracted
	}
	rec.Lossy, rec.Truncated = res.Body.Lossy, res.Body.Truncated
	rec.Text, rec.Untrimmed = res.Body.Text, res.Body.Untrimmed
	rec.Passages = derivePassages(rec.Subject, rec.Text)
	return rec
}
