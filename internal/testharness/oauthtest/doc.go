// Package oauthtest runs a fake OAuth 2.0 authorization server for tests,
// with the two endpoints a mailbox token account meets:
//
//   - a token endpoint answering the refresh_token grant (RFC 6749 §6),
//     authenticating the client with HTTP Basic (RFC 6749 §2.3.1) and
//     answering as RFC 6749 §5.1 and §5.2 prescribe;
//   - a token-introspection endpoint (RFC 7662) for Dovecot's oauth2 passdb
//     (dovecot.WithOAuth2), which posts each bearer token to it and admits
//     the login when the answer is "active": true with a "username" equal
//     to the user logging in.
//
// Both are httptest servers on 127.0.0.1 that close in the test's cleanup:
//
//	as := oauthtest.Start(t)
//	srv := dovecot.Start(t, dovecot.WithOAuth2(as.IntrospectionURL()))
//	u := srv.NewUser()
//	refresh := as.Grant(u.Name())             // a refresh token for u
//	// configure TokenURL(), ClientID(), ClientSecret(), refresh ...
//	as.FailNext(http.StatusServiceUnavailable, "temporarily_unavailable")
//	token := as.Issue(u.Name())               // or mint an access token directly
//
// # Time
//
// The server keeps its own clock, which starts at the real time and moves
// only when Advance moves it. An access token's expiry, and therefore
// whether introspection still calls it active, is measured on that clock,
// so a test that shares the clock with the code under test (Now) can expire
// a token without waiting.
//
// # Secrets
//
// The client secret, every refresh token and every access token are random
// strings starting with SecretMarker, and Secrets lists them all, so a test
// can search everything the code under test logged, returned or exported
// for any of them.
//
// The package is for tests only: it stores everything in memory, in the
// clear.
package oauthtest
