// Package mimex turns raw MIME into the values MailFathom stores: bytes in,
// extracted values out. It touches no database and no network, logs nothing,
// and never panics: Extract returns a Result for every input, and a message
// it cannot read is a Result with Readable false and a named Failure
// (Unparseable, PartCountExceeded, NestingDepthExceeded, ReferenceScanFailed)
// and a body recorded as NotExtracted.
//
// # Reading
//
// One forward-only pass reads the message with go-message's streaming reader
// (textproto.ReadHeader and textproto.MultipartReader, the machinery under
// message.Entity; charsets come from the go-message charset tables). The
// Content-Type and Content-Disposition parameters are parsed here rather
// than by go-message's Entity, which uses mime.ParseMediaType and loses every
// parameter of a field when one is malformed — an unquoted
// boundary=----=_NextPart_… would otherwise make an ordinary message
// unreadable. RFC 2231 (continuations, any charset) and RFC 2047 words in
// name/filename are decoded.
//
// Parts are counted as they are opened and their nesting checked as they are
// entered, so a message is abandoned the moment it crosses
// Limits.MaxPartCount or Limits.MaxNestingDepth and nothing beyond the limit
// is built. The walk keeps a small record per classified part and never a
// payload: the raw message is held once (the caller's slice), a part's
// decoded size is measured by streaming it through a counter that keeps
// nothing, and only body text is decoded, into a buffer bounded by
// Limits.MaxExtractedTextCharacters while it fills. A multipart/related whose
// start parameter names no part is the one case that needs a second pass (its
// first child is then the body); the second pass is bounded like the first.
//
// A message whose input ends before a closing delimiter is read as far as it
// goes. A malformed header block, a part header that does not parse, and a
// multipart without a boundary are Unparseable.
//
// # Header fields
//
// Participants come from Sender, From, Reply-To, To, Cc and Bcc, each
// carrying its role; groups are flattened; each address is parsed on its own
// so a malformed one is dropped without losing its neighbours. The address
// keeps what the message wrote (a quoted local part keeps its quotes), its
// comparison form is strings.ToUpper of that and is the whole identity, the
// domain is what follows the last '@'. The sent time comes from Date and the
// received time from the topmost Received after its final ';', both in UTC and
// absent when they do not parse. The subject is decoded and loses its control
// characters; one that separated words (TAB, CR, LF, …) becomes a single
// space, the others are deleted. Message-ID, In-Reply-To and References lose
// only their angle brackets and the white space around them; case and
// interior white space are kept, References keeps header order with exact
// duplicates collapsed, and an identifier holding a control character is
// refused.
//
// # Attachments
//
// Parts are classified by MailFathom's ordered rules, not by
// Content-Disposition:
//
//  1. multipart/encrypted and multipart/signed are recognized only with their
//     RFC 1847 protocol parameter. Encrypted marks the message and classifies
//     no child (none is opened); signed marks an unverified signature,
//     classifies its first child in its own position, skips the detached
//     signature, and classifies any further child as an ordinary part.
//     Without protocol either is read as the mixed multipart it then is.
//  2. Cryptographic leaves — application/(x-)pkcs7-signature,
//     application/pgp-signature, application/(x-)pkcs7-mime,
//     application/pgp-encrypted — are never attachments. pkcs7-mime's
//     smime-type sets the marker: enveloped-data and authEnveloped-data
//     encrypted, signed-data unverified signature; pgp-encrypted marks
//     encrypted and the signature types mark a signature.
//  3. The body branch is resolved recursively from the message: a
//     multipart/mixed (or any other subtype) gives its first child, a
//     multipart/related the child its start parameter names (the first child
//     without one, or when it names none), a multipart/alternative every
//     member. Whatever leaf that reaches is body, not attachment — including
//     a text/calendar alternative.
//  4. A part with a Content-ID that an HTML body part references by cid: in an
//     attribute value or in a <style> sheet (tokenized with
//     golang.org/x/net/html, the URL percent-decoded), and whose disposition
//     is inline or absent, is an inline resource.
//  5. Everything else is an attachment: a message/rfc822 counts once and is
//     not recursed into; a TNEF part (application/ms-tnef or winmail.dat) is
//     marked unexpanded; a text/calendar outside an alternative is marked as
//     a calendar.
//
// The reference scan is bounded (MaxReferenceScanTokenBytes per token,
// MaxReferenceCount distinct references); when it is defeated and a part's
// classification depended on it, the message is ReferenceScanFailed.
//
// File names are decoded by this package and sanitized by SanitizeFileName.
//
// # Body text
//
// The text comes from the body branch only. The first text/plain part with
// words in it wins; otherwise the first HTML part with words is converted
// (script, style and head dropped, block elements as line breaks, character
// references decoded, white space collapsed, blockquotes prefixed with "> ",
// nothing fetched) and marked Lossy. A body inside a cryptographic envelope
// records Encrypted (a readable message that merely carries an encrypted
// part does not), a body branch without text records NoTextualBody, and an
// unreadable message NotExtracted. The text is bounded by
// Limits.MaxExtractedTextCharacters (Unicode scalar values) while it
// accumulates and cut on a text-element boundary; past the bound the HTML
// tokenizer continues for cid: references only, so the attachment summary
// does not depend on the length of the text. Quoted history and a signature
// are then trimmed from the end only (see Body), the untrimmed text kept
// beside.
package mimex
