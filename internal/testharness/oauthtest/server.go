package oauthtest

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// SecretMarker starts every secret the server makes: the client secret,
// refresh tokens and access tokens.
const SecretMarker = "SENTINEL"

// DefaultLifetime is how long an access token is valid unless SetLifetime
// says otherwise.
const DefaultLifetime = time.Hour

// DefaultClientID is the client identifier Start registers.
const DefaultClientID = "mailfathom-test-client"

// Server is a running fake authorization server. Its methods are safe for
// concurrent use, so they may be called while the code under test is
// talking to it.
type Server struct {
	t             testing.TB
	token         *httptest.Server
	introspection *httptest.Server
	clientID      string
	clientSecret  string

	mu       sync.Mutex
	now      time.Time
	lifetime time.Duration
	rotate   bool
	// grants maps a live refresh token to its user.
	grants map[string]string
	// tokens maps an issued access token to its user and expiry.
	tokens   map[string]*issued
	secrets  []string
	script   []scripted
	requests []TokenRequest
	// introspected lists the access tokens introspection was asked about,
	// in order.
	introspected []string
}

type issued struct {
	username string
	expiry   time.Time
	revoked  bool
}

// scripted is a canned answer for one token request.
type scripted struct {
	status int
	code   string
	stall  bool
	raw    string
}

// TokenRequest is what one request to the token endpoint carried, minus
// its secrets.
type TokenRequest struct {
	// GrantType is the grant_type parameter.
	GrantType string
	// Scope is the scope parameter, "" when absent.
	Scope string
	// BasicAuth is whether the client authenticated with HTTP Basic.
	BasicAuth bool
	// CredentialsInBody is whether client_id or client_secret was sent in
	// the request body (RFC 6749 §2.3.1 does not recommend it).
	CredentialsInBody bool
	// Status is the HTTP status the server answered with.
	Status int
}

// Start starts a server with a new random client secret for
// DefaultClientID and closes it in t's cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		t:        t,
		clientID: DefaultClientID,
		now:      time.Now(),
		lifetime: DefaultLifetime,
		grants:   map[string]string{},
		tokens:   map[string]*issued{},
	}
	s.clientSecret = s.newSecret("cs")
	s.token = httptest.NewServer(http.HandlerFunc(s.serveToken))
	s.introspection = httptest.NewServer(http.HandlerFunc(s.serveIntrospection))
	t.Cleanup(func() {
		s.token.CloseClientConnections()
		s.introspection.CloseClientConnections()
		s.token.Close()
		s.introspection.Close()
	})
	return s
}

// TokenURL returns the token endpoint, an http:// URL on 127.0.0.1.
func (s *Server) TokenURL() string { return s.token.URL + "/token" }

// IntrospectionURL returns the introspection endpoint, for
// dovecot.WithOAuth2.
func (s *Server) IntrospectionURL() string { return s.introspection.URL + "/introspect" }

// ClientID returns the registered client identifier.
func (s *Server) ClientID() string { return s.clientID }

// ClientSecret returns the registered client's secret.
func (s *Server) ClientSecret() string { return s.clientSecret }

// Grant returns a new refresh token for username.
func (s *Server) Grant(username string) string {
	rt := s.newSecret("rt")
	s.mu.Lock()
	s.grants[rt] = username
	s.mu.Unlock()
	return rt
}

// Issue returns a new access token for username, valid for the current
// lifetime (DefaultLifetime when SetLifetime set zero), as the token
// endpoint would issue it, without a request: for tests of the code that
// sends a token rather than obtains one.
func (s *Server) Issue(username string) string {
	access := s.newSecret("at")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[access] = &issued{username: username, expiry: s.now.Add(cmp.Or(s.lifetime, DefaultLifetime))}
	return access
}

// RevokeGrant makes refreshToken unusable, as a user revoking the
// application's access would.
func (s *Server) RevokeGrant(refreshToken string) {
	s.mu.Lock()
	delete(s.grants, refreshToken)
	s.mu.Unlock()
}

// RotateRefreshTokens makes every later successful refresh return a new
// refresh token and invalidate the one it was given (RFC 6749 §6, RFC 9700
// §4.14.2).
func (s *Server) RotateRefreshTokens(on bool) {
	s.mu.Lock()
	s.rotate = on
	s.mu.Unlock()
}

// SetLifetime sets the lifetime (expires_in) of access tokens issued from
// now on. Zero issues tokens without expires_in, which introspection still
// treats as valid for DefaultLifetime.
func (s *Server) SetLifetime(d time.Duration) {
	s.mu.Lock()
	s.lifetime = d
	s.mu.Unlock()
}

// FailNext makes the next token request, after the ones already scripted,
// be answered with status and, when code is not empty, the RFC 6749 §5.2
// error body {"error": code, ...}. The body's error_description names the
// refresh token the request carried, as a careless server might, so a test
// can check that nothing of a response body leaks.
func (s *Server) FailNext(status int, code string) {
	s.mu.Lock()
	s.script = append(s.script, scripted{status: status, code: code})
	s.mu.Unlock()
}

// AnswerNext makes the next token request be answered with status and the
// body raw, verbatim, as application/json.
func (s *Server) AnswerNext(status int, raw string) {
	s.mu.Lock()
	s.script = append(s.script, scripted{status: status, raw: raw})
	s.mu.Unlock()
}

// StallNext makes the next token request hang until the client gives up.
func (s *Server) StallNext() {
	s.mu.Lock()
	s.script = append(s.script, scripted{stall: true})
	s.mu.Unlock()
}

// TokenRequests returns the requests the token endpoint received, in
// order.
func (s *Server) TokenRequests() []TokenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]TokenRequest(nil), s.requests...)
}

// Introspections returns the access tokens the introspection endpoint was
// asked about, in order.
func (s *Server) Introspections() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.introspected...)
}

// Issued returns every access token issued so far, in order.
func (s *Server) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, sec := range s.secrets {
		if _, ok := s.tokens[sec]; ok {
			out = append(out, sec)
		}
	}
	return out
}

// Revoke makes introspection report accessToken inactive.
func (s *Server) Revoke(accessToken string) {
	s.mu.Lock()
	if it, ok := s.tokens[accessToken]; ok {
		it.revoked = true
	}
	s.mu.Unlock()
}

// Now returns the server's clock.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the server's clock forward by d.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	s.now = s.now.Add(d)
	s.mu.Unlock()
}

// Secrets returns every secret the server made: the client secret, the
// refresh tokens and the access tokens.
func (s *Server) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.secrets...)
}

func (s *Server) newSecret(kind string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	v := SecretMarker + "-" + kind + "-" + hex.EncodeToString(b)
	s.mu.Lock()
	s.secrets = append(s.secrets, v)
	s.mu.Unlock()
	return v
}

// serveToken answers the refresh_token grant (RFC 6749 §6).
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	req := TokenRequest{}
	status, body := s.answerToken(r, &req)
	req.Status = status
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	if status == 0 {
		// Stalled: hold the request until the client gives up.
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="oauthtest"`)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// answerToken decides the answer to one token request and records what the
// request carried into req. Status 0 means stall.
func (s *Server) answerToken(r *http.Request, req *TokenRequest) (int, []byte) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return errorBody(http.StatusBadRequest, "invalid_request", "")
	}
	if err := r.ParseForm(); err != nil {
		return errorBody(http.StatusBadRequest, "invalid_request", "")
	}
	form := r.PostForm
	req.GrantType = form.Get("grant_type")
	req.Scope = form.Get("scope")
	req.CredentialsInBody = form.Has("client_id") || form.Has("client_secret")
	refresh := form.Get("refresh_token")

	s.mu.Lock()
	var next *scripted
	if len(s.script) > 0 {
		next = &s.script[0]
		s.script = s.script[1:]
	}
	s.mu.Unlock()
	switch {
	case next != nil && next.stall:
		return 0, nil
	case next != nil && next.raw != "":
		return next.status, []byte(next.raw)
	case next != nil:
		// A careless server echoing the request: a client that reports a
		// response body would leak the refresh token.
		return errorBody(next.status, next.code, "refresh token "+refresh+" was not accepted")
	}

	id, secret, ok := r.BasicAuth()
	req.BasicAuth = ok
	if ok {
		// RFC 6749 §2.3.1: both are form-encoded before Basic encoding.
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	}
	if !ok || id != s.clientID || secret != s.clientSecret {
		return errorBody(http.StatusUnauthorized, "invalid_client", "")
	}
	if req.GrantType != "refresh_token" {
		return errorBody(http.StatusBadRequest, "unsupported_grant_type", "")
	}

	s.mu.Lock()
	username, known := s.grants[refresh]
	lifetime, rotate, now := s.lifetime, s.rotate, s.now
	s.mu.Unlock()
	if !known {
		return errorBody(http.StatusBadRequest, "invalid_grant", "")
	}
	access := s.newSecret("at")
	answer := map[string]any{"access_token": access, "token_type": "Bearer"}
	validFor := lifetime
	if lifetime > 0 {
		answer["expires_in"] = int(lifetime / time.Second)
	} else {
		validFor = DefaultLifetime
	}
	if req.Scope != "" {
		answer["scope"] = req.Scope
	}
	var newRefresh string
	if rotate {
		newRefresh = s.newSecret("rt")
		answer["refresh_token"] = newRefresh
	}
	s.mu.Lock()
	s.tokens[access] = &issued{username: username, expiry: now.Add(validFor)}
	if rotate {
		delete(s.grants, refresh)
		s.grants[newRefresh] = username
	}
	s.mu.Unlock()
	body, _ := json.Marshal(answer)
	return http.StatusOK, body
}

func errorBody(status int, code, description string) (int, []byte) {
	if code == "" {
		return status, []byte(`{"message":"` + description + `"}`)
	}
	body, _ := json.Marshal(map[string]string{"error": code, "error_description": description})
	return status, body
}

// serveIntrospection answers RFC 7662 introspection requests as Dovecot's
// oauth2 passdb sends them with introspection_mode = post: a form with the
// parameter token.
func (s *Server) serveIntrospection(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	token := r.PostForm.Get("token")
	s.mu.Lock()
	s.introspected = append(s.introspected, token)
	it, ok := s.tokens[token]
	now := s.now
	answer := map[string]any{"active": false}
	if ok && !it.revoked && now.Before(it.expiry) {
		answer = map[string]any{
			"active":     true,
			"username":   it.username,
			"client_id":  s.clientID,
			"token_type": "Bearer",
			"exp":        it.expiry.Unix(),
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}
