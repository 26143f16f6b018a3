package mimex

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func participantsOf(r Result, role Role) []Participant {
	var out []Participant
	for _, p := range r.Participants {
		if p.Role == role {
			out = append(out, p)
		}
	}
	return out
}

func addressesOf(r Result, role Role) []string {
	var out []string
	for _, p := range participantsOf(r, role) {
		out = append(out, p.Address)
	}
	return out
}

func headerCases() []tcase {
	return []tcase{
		{
			name: "roles",
			raw: crlf(`Sender: Secretary <sec@example.org>
From: Boss <boss@example.org>
Reply-To: replies@example.org
To: to1@example.org, To Two <to2@example.org>
Cc: cc@example.org
Bcc: bcc@example.org
Subject: roles

body
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, []string{"sec@example.org"}, addressesOf(r, RoleSender))
				require.Equal(t, []string{"boss@example.org"}, addressesOf(r, RoleFrom))
				require.Equal(t, []string{"replies@example.org"}, addressesOf(r, RoleReplyTo))
				require.Equal(t, []string{"to1@example.org", "to2@example.org"}, addressesOf(r, RoleTo))
				require.Equal(t, []string{"cc@example.org"}, addressesOf(r, RoleCc))
				require.Equal(t, []string{"bcc@example.org"}, addressesOf(r, RoleBcc))
				require.Equal(t, "Boss", participantsOf(r, RoleFrom)[0].DisplayName)
				require.Equal(t, "To Two", participantsOf(r, RoleTo)[1].DisplayName)
				require.Len(t, r.Participants, 7)
			},
		},
		{
			name: "groups flattened",
			raw: crlf(`From: a@example.org
To: Team: One <one@example.org>, two@example.org;, three@example.org
Cc: undisclosed-recipients:;
Subject: groups

body
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, []string{"one@example.org", "two@example.org", "three@example.org"}, addressesOf(r, RoleTo))
				require.Empty(t, addressesOf(r, RoleCc))
			},
		},
		{
			name: "malformed address dropped, the good ones kept",
			raw: crlf(`From: a@example.org
To: good@example.org, not an address, broken@, @nodomain.example, "unterminated@example.org, other@example.org
Cc: fine@example.org, <also broken, last@example.org
Subject: malformed

body
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, []string{"good@example.org"}, addressesOf(r, RoleTo))
				require.Equal(t, []string{"fine@example.org"}, addressesOf(r, RoleCc)[:1])
				for _, a := range addressesOf(r, RoleCc) {
					require.NotContains(t, a, "broken")
				}
			},
		},
		{
			name: "quoted local part with at-sign and space, comparison form",
			raw: crlf(`From: "John Smith"@example.com
To: "a@b"@Example.NET (comment), Mixed.Case@Example.COM
Cc: MIXED.case@example.com
Subject: quoted

body
`),
			check: func(t *testing.T, r Result) {
				from := participantsOf(r, RoleFrom)
				require.Len(t, from, 1)
				require.Equal(t, `"John Smith"@example.com`, from[0].Address)
				require.Equal(t, `"JOHN SMITH"@EXAMPLE.COM`, from[0].Comparison)
				require.Equal(t, "example.com", from[0].Domain)

				to := participantsOf(r, RoleTo)
				require.Len(t, to, 2)
				require.Equal(t, `"a@b"@Example.NET`, to[0].Address)
				require.Equal(t, "Example.NET", to[0].Domain, "the domain follows the last at-sign")
				require.Equal(t, "Mixed.Case@Example.COM", to[1].Address, "what the message wrote is kept")
				require.Equal(t, "MIXED.CASE@EXAMPLE.COM", to[1].Comparison)

				cc := participantsOf(r, RoleCc)
				require.Equal(t, to[1].Comparison, cc[0].Comparison, "case alone does not make another participant")
			},
		},
		{
			name: "duplicates within a role collapse by comparison form",
			raw: crlf(`From: a@example.org
To: Alice <alice@example.org>, ALICE@EXAMPLE.ORG, "Someone Else" <Alice@Example.org>
Subject: dup

body
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, []string{"alice@example.org"}, addressesOf(r, RoleTo))
			},
		},
		{
			name: "encoded display name",
			raw: crlf(`From: =?utf-8?q?J=C3=BCrgen_M=C3=BCller?= <jm@example.de>
Subject: x

body
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "Jürgen Müller", participantsOf(r, RoleFrom)[0].DisplayName)
			},
		},
		{
			name: "date and topmost received",
			raw: crlf(`From: a@example.org
Received: from mx2.example.org by mx3.example.org; Tue, 3 Jan 2006 10:00:00 +0100 (CET)
Received: from mx1.example.org by mx2.example.org;
 Tue, 3 Jan 2006 08:00:00 +0000
Date: Mon, 2 Jan 2006 15:04:05 -0700
Subject: dates

body
`),
			check: func(t *testing.T, r Result) {
				require.NotNil(t, r.SentAt)
				require.Equal(t, time.Date(2006, 1, 2, 22, 4, 5, 0, time.UTC), *r.SentAt)
				require.Equal(t, time.UTC, r.SentAt.Location())
				require.NotNil(t, r.ReceivedAt)
				require.Equal(t, time.Date(2006, 1, 3, 9, 0, 0, 0, time.UTC), *r.ReceivedAt, "the topmost Received, after its final semicolon")
			},
		},
		{
			name: "received with semicolons in its clauses",
			raw: crlf(`Received: from a (helo=b;c) by d with ESMTP id x; for <u@example.org>; Wed, 4 Jan 2006 01:02:03 +0000
Subject: r

body
`),
			check: func(t *testing.T, r Result) {
				require.NotNil(t, r.ReceivedAt)
				require.Equal(t, time.Date(2006, 1, 4, 1, 2, 3, 0, time.UTC), *r.ReceivedAt)
				require.Nil(t, r.SentAt, "no Date header yields nothing")
			},
		},
		{
			name: "unparseable date and received yield nothing",
			raw: crlf(`Date: sometime last week
Received: from a by b; not a date
Received: from c by d; Wed, 4 Jan 2006 01:02:03 +0000
Subject: r

body
`),
			check: func(t *testing.T, r Result) {
				require.Nil(t, r.SentAt)
				require.Nil(t, r.ReceivedAt, "only the topmost Received is read; no guess from a lower one")
			},
		},
		{
			name: "received without semicolon",
			raw: crlf(`Received: from a by b
Subject: r

body
`),
			check: func(t *testing.T, r Result) {
				require.Nil(t, r.ReceivedAt)
			},
		},
		{
			name: "subject decoded",
			raw: crlf(`Subject: =?utf-8?B?w5xiZXJzaWNodA==?= und =?iso-8859-1?q?Gr=FC=DFe?= =?x-unknown?q?kept?=
 =?utf-8?q?a?= =?utf-8?q?b?=

body
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "Übersicht und Grüße =?x-unknown?q?kept?= ab", r.Subject)
			},
		},
		{
			name: "subject folded stays one line",
			raw: crlf(`Subject: a long subject
	that was folded

body
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "a long subject that was folded", r.Subject)
			},
		},
		{
			name: "subject control characters removed",
			raw: crlf(`Subject: =?utf-8?q?line=0D=0Aone=09two=07bell=00nul?=

body
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "line one twobellnul", r.Subject)
			},
		},
		{
			name: "subject in raw latin-1",
			raw:  crlf("Subject: caf\xe9\n\nbody\n"),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "café", r.Subject)
			},
		},
		{
			name: "thread identifiers",
			raw: crlf(`Message-ID:  < Mixed.Case@Example.ORG >
In-Reply-To: <parent@example.org> (comment)
References: <root@example.org> <Parent@example.org>
 <root@example.org>
	<parent@example.org> <"a b"@example.test>
Subject: thread

body
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "Mixed.Case@Example.ORG", r.MessageID, "brackets and surrounding space removed, case kept")
				require.Equal(t, []string{"parent@example.org"}, r.InReplyTo)
				require.Equal(t, []string{"root@example.org", "Parent@example.org", "parent@example.org", `"a b"@example.test`}, r.References,
					"header order kept, exact duplicates collapsed, case-different identifiers kept apart, interior space kept")
			},
		},
		{
			name: "in-reply-to with a phrase",
			raw: crlf(`In-Reply-To: Your message of "Mon, 2 Jan 2006" <old@example.org>
Message-ID: no-brackets@example.org
Subject: t

body
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, []string{"old@example.org"}, r.InReplyTo)
				require.Equal(t, "no-brackets@example.org", r.MessageID)
			},
		},
		{
			name: "identifier with a control character refused",
			raw:  crlf("Message-ID: <bad\x01id@example.org>\nReferences: <ok@example.org> <tab\tinside@example.org> <also\x7fbad@example.org> <fine@example.org>\nSubject: t\n\nbody\n"),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "", r.MessageID)
				require.Equal(t, []string{"ok@example.org", "fine@example.org"}, r.References)
			},
		},
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	runCases(t, headerCases())
}
