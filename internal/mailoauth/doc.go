// Package mailoauth holds the access tokens of MailFathom's token accounts:
// the accounts whose allow-list permits only XOAUTH2 and/or OAUTHBEARER
// (RFC 7628) and which therefore authenticate with an OAuth 2.0 bearer
// token instead of a password (see config.OAuth).
//
// A Source is built once per process and asked for a token by every
// connection of such an account, after the connection has chosen its
// mechanism:
//
//	tokens, err := mailoauth.NewSource(mailoauth.Options{Resolver: resolver, Registry: pipelines})
//	...
//	token, err := tokens.Token(ctx, config.AccountKey(a.ID), a.OAuth)
//	defer clear(token)
//
// # Obtaining a token
//
// Each call resolves the account's client ID, client secret and refresh
// token references afresh, so a rotated reference is used by the next
// connection without a restart, and wipes the material it read once the
// call ends. When the Source holds no usable token for the account it
// exchanges the refresh token for one at the token endpoint: the
// refresh_token grant (RFC 6749 §6), the client authenticated with HTTP
// Basic (RFC 6749 §2.3.1), the configured scope sent when there is one, and
// the answer read as RFC 6749 §5.1 and §5.2 define it.
//
// The exchange runs under the account's MailAuthorizationServerInvocation
// pipeline (package resilience), which is the only retry layer around it:
// the HTTP client (NewHTTPClient) retries nothing — net/http never replays
// a POST — follows no redirect, which would carry the client's credentials
// somewhere it was not configured to send them, and has no timeout of its
// own, so the pipeline's attempt timeout is what bounds a request. A token
// endpoint answering 408, 429 or 5xx is therefore retried within that
// budget; 400, 401 and every other refusal end the exchange at once, since
// repeating a refused credential only gets refused again.
//
// # Caching
//
// The access token is kept in memory per account until RefreshMargin
// before it expires (expires_in), so connections in quick succession share
// one token and the first connection after that asks for a new one. A
// token without a lifetime is used for one connection only. Any change to
// what the token was obtained with — the endpoint, a rotated reference,
// the scope — drops it at once, and Forget drops it when a mail server
// refused it. When the authorization server rotates the refresh token
// (RFC 6749 §6 lets it issue a new one), the new one is kept in memory for
// the account and used from then on, until the configured refresh token
// changes; it is never written anywhere, so an operator whose server
// rotates refresh tokens provisions a new one after a restart.
//
// Exchanges of one account are serialized: a server that rotates refresh
// tokens invalidates the old one on first use, so two concurrent refreshes
// with it would make the second fail.
//
// # Secrets
//
// No error, log line or metric of this package carries a client ID, a
// client secret, a refresh token, an access token or the body of a token
// endpoint's answer. A failure names the HTTP status and, when the server
// sent a well-formed one, the OAuth error code (such as invalid_grant).
// The buffers this package owns — the resolved material, the request body,
// the response body, the cached tokens — are wiped when they are no longer
// needed. Copies outside its reach remain: net/http carries the
// Authorization header as a string, and the SASL clients that send the
// token make their own copies (see package sasl).
package mailoauth
