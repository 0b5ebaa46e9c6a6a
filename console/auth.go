package console

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/acemq-go/acemq/replay"
)

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// authInfo is how a request proved it may use the console: a session
// cookie (its CSRF token is the session's) or the token in an
// Authorization: Bearer header (no CSRF token needed: a browser never adds
// that header by itself).
type authInfo struct {
	session string
	csrf    string
	bearer  bool
}

type authKey struct{}

func authOf(r *http.Request) authInfo {
	a, _ := r.Context().Value(authKey{}).(authInfo)
	return a
}

// authed reports how r carries the right to use the console, if it does.
// A wrong bearer token counts as a failed sign-in (throttled, audited);
// refused says the request was answered already (429).
func (c *Console) authed(w http.ResponseWriter, r *http.Request) (a authInfo, ok, refused bool) {
	if scheme, t, found := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); found && strings.EqualFold(scheme, "Bearer") {
		if !c.mayTry(w, r, "bearer token") {
			return authInfo{}, false, true
		}
		if equal(strings.TrimSpace(t), c.cfg.Token) {
			return authInfo{bearer: true}, true, false
		}
		c.failedSignIn(r, "wrong bearer token")
		return authInfo{}, false, false
	}
	if ck, err := r.Cookie(c.cookieName); err == nil && c.sessions.valid(ck.Value) {
		return authInfo{session: ck.Value, csrf: c.sessions.csrf(ck.Value)}, true, false
	}
	return authInfo{}, false, false
}

// clientKey is the address failed sign-ins are counted by: the peer's
// host, or the client a trusted proxy forwards for.
func (c *Console) clientKey(r *http.Request) string {
	client, _ := c.who(r)
	if host, _, err := net.SplitHostPort(client); err == nil {
		return host
	}
	return client
}

// mayTry reports whether r may attempt a sign-in now; when it may not, it
// answers 429 with Retry-After (and audits the first refusal of a run).
func (c *Console) mayTry(w http.ResponseWriter, r *http.Request, what string) bool {
	ok, first, wait := c.signIns.allow(c.clientKey(r))
	if ok {
		return true
	}
	if first {
		c.audit.add(r, auditEntry{Action: "sign-in", Result: "throttled: too many failed sign-ins from this address (" + what + "); answering 429 until they slow down"})
	}
	secs := int(wait.Seconds()) + 1
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	msg := fmt.Sprintf("Too many failed sign-ins from this address; try again in %d s.", secs)
	if strings.HasPrefix(r.URL.Path, "/api/") || r.Header.Get("Authorization") != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(struct {
			Error string `json:"error"`
		}{msg})
		return false
	}
	c.loginPage(w, r, http.StatusTooManyRequests, msg)
	return false
}

// failedSignIn counts and audits one failed sign-in.
func (c *Console) failedSignIn(r *http.Request, why string) {
	c.signIns.failed(c.clientKey(r))
	c.audit.add(r, auditEntry{Action: "sign-in", Result: "failed: " + why})
}

// guard wraps a page: without a session or the token it answers 401 (the
// login form, or a JSON error under /api/). A request carrying ?token= is
// refused whatever else it carries: the token does not go in a URL, which
// a browser keeps in its history (sign in with the form, or a one-time
// SignInLink).
func (c *Console) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("token") {
			c.audit.add(r, auditEntry{Action: "sign-in", Result: "refused: a token in the URL (" + r.URL.Path + ")"})
			c.loginPage(w, r, http.StatusBadRequest, "The token does not go in a URL: a browser keeps every URL it opens in its history. Sign in with the form below (or the one-time link the console printed). If that token is the console's, it is now in this browser's history: restart the console with a new one.")
			return
		}
		a, ok, refused := c.authed(w, r)
		if refused {
			return
		}
		if !ok {
			c.unauthorized(w, r, "")
			return
		}
		if why := embedded(r); why != "" {
			c.audit.add(r, auditEntry{Action: "request", Queue: r.PathValue("queue"), Result: "refused: " + why + " (" + r.Method + " " + r.URL.Path + ")"})
			c.errorPage(w, r, http.StatusForbidden, "This request was made by a page of another origin ("+why+"); open the console itself.")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), authKey{}, a)))
	}
}

// unauthorized answers 401: JSON under /api/ (a script reads it), the
// login form elsewhere.
func (c *Console) unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		if msg == "" {
			msg = "not signed in: sign in again on the console's page (with the token, or a one-time link it printed), or send Authorization: Bearer <token>"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(struct {
			Error string `json:"error"`
		}{msg})
		return
	}
	c.loginPage(w, r, http.StatusUnauthorized, msg)
}

// scoped refuses, with 404, a queue the console does not show: it reads
// and changes only the QUEUE.dlq and QUEUE.parked queues its overview
// lists, never a live queue, on every route and whether or not it is
// read-only (each read takes the messages and gives them back, which
// counts against a quorum queue's delivery limit).
func (c *Console) scoped(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		queue := r.PathValue("queue")
		if !replay.IsSetAside(queue) {
			c.audit.add(r, auditEntry{Action: "request", Queue: queue, Result: "refused: not a QUEUE.dlq or QUEUE.parked queue (" + r.Method + " " + r.URL.Path + ")"})
			c.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("%s is not a dead-letter queue; the console reads and changes only the QUEUE.dlq and QUEUE.parked queues its overview lists, never a live queue (reading one would take its messages and give them back, and on a quorum queue count each read against its delivery limit).", quote(queue)))
			return
		}
		h(w, r)
	}
}

// action wraps a state-changing handler: POST only, signed in, the
// session's CSRF token from the form (not needed with a bearer token), a
// same-origin request when the browser says where it comes from, and
// refused on a read-only console.
func (c *Console) action(name string, h http.HandlerFunc) http.HandlerFunc {
	return c.guard(c.scoped(func(w http.ResponseWriter, r *http.Request) {
		queue := r.PathValue("queue")
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			c.errorPage(w, r, http.StatusMethodNotAllowed, "This action changes the broker, so it is a POST from the console's own form.")
			return
		}
		if c.cfg.ReadOnly {
			c.audit.add(r, auditEntry{Action: name, Queue: queue, Result: "refused: the console is read-only"})
			c.errorPage(w, r, http.StatusForbidden, "This console is read-only (--read-only): it shows messages but changes nothing.")
			return
		}
		if a := authOf(r); !a.bearer && (a.csrf == "" || !equal(r.PostFormValue("csrf"), a.csrf)) {
			c.audit.add(r, auditEntry{Action: name, Queue: queue, Result: "refused: missing or wrong CSRF token"})
			c.errorPage(w, r, http.StatusForbidden, "This request did not carry the CSRF token of the console's own page; reload the page and try again.")
			return
		}
		if why := crossSite(r); why != "" {
			c.audit.add(r, auditEntry{Action: name, Queue: queue, Result: "refused: " + why})
			c.errorPage(w, r, http.StatusForbidden, "This request came from another site ("+why+"), not the console's own page; start the action from the console.")
			return
		}
		h(w, r)
	}))
}

// embedded says why r is a page of another origin loading the console as
// a resource (an image, a script, a fetch): the browser marks it
// Sec-Fetch-Site cross-site or same-site (another port of the same host
// is same-site, and gets the cookie) and not a navigation. Every page the
// console serves is read, and may read a queue, only when asked for
// directly; "" when r is not such a request.
func embedded(r *http.Request) string {
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "cross-site" && site != "same-site" {
		return ""
	}
	if mode := r.Header.Get("Sec-Fetch-Mode"); mode != "navigate" {
		return fmt.Sprintf("the browser marks it Sec-Fetch-Site: %s, Sec-Fetch-Mode: %s", site, safeHeader(mode))
	}
	if dest := r.Header.Get("Sec-Fetch-Dest"); dest != "" && dest != "document" {
		return fmt.Sprintf("the browser marks it Sec-Fetch-Site: %s, Sec-Fetch-Dest: %s", site, safeHeader(dest))
	}
	return ""
}

func safeHeader(v string) string {
	if v == "" {
		return "(none)"
	}
	return quote(v)
}

// crossSite says why a request comes from another origin, or "" when the
// browser marks it as coming from this one (Sec-Fetch-Site), or its Origin
// header, when present, names the host it was sent to. Clients that send
// neither (curl with the token) rely on the CSRF token or the bearer token.
func crossSite(r *http.Request) string {
	switch s := r.Header.Get("Sec-Fetch-Site"); s {
	case "same-origin", "none":
		return ""
	case "":
	default:
		return "the browser marks it Sec-Fetch-Site: " + s
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return ""
	}
	if u, err := url.Parse(o); err == nil && u.Host == r.Host {
		return ""
	}
	return fmt.Sprintf("its Origin %s is not %s", quote(o), quote(r.Host))
}

// signIn starts a session and sets its cookie; it answers 500 and returns
// false if no session id could be made.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) bool {
	sid, err := c.sessions.start()
	if err != nil {
		c.errorPage(w, r, http.StatusInternalServerError, "Cannot start a session: the system's random source failed; try again.")
		return false
	}
	c.setCookie(w, r, sid, int(c.cfg.SessionTTL.Seconds()))
	return true
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	path := c.cfg.BasePath
	if path == "" {
		path = "/"
	}
	// Secure over TLS, served directly or by a trusted proxy that says so.
	secure := r.TLS != nil || c.fromTrustedProxy(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	http.SetCookie(w, &http.Cookie{Name: c.cookieName, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

// login takes the token from the login form (or a one-time code pasted
// into it); failures are throttled and audited.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.mayTry(w, r, "sign-in form") {
		return
	}
	t := r.PostFormValue("token")
	if !equal(t, c.cfg.Token) && !c.sessions.redeem(t) {
		c.failedSignIn(r, "wrong token in the sign-in form")
		c.loginPage(w, r, http.StatusUnauthorized, "That token is not this console's; paste the token it was given (or open a fresh one-time link).")
		return
	}
	c.audit.add(r, auditEntry{Action: "sign-in", Result: "signed in with the token"})
	if c.signIn(w, r) {
		http.Redirect(w, r, c.cfg.BasePath+"/", http.StatusSeeOther)
	}
}

// signInPage is the page a one-time link opens: its script reads the code
// from the fragment (which the browser never sent), drops the fragment
// from the address and posts the code.
func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "signin", "Sign in", nil)
}

// signInWithCode spends a one-time code for a session.
func (c *Console) signInWithCode(w http.ResponseWriter, r *http.Request) {
	if !c.mayTry(w, r, "sign-in link") {
		return
	}
	if !c.sessions.redeem(r.PostFormValue("code")) {
		c.failedSignIn(r, "a sign-in code that is wrong, used already or expired")
		c.loginPage(w, r, http.StatusUnauthorized, "That sign-in link was used already or has expired (each works once). Sign in with the token, or ask for a new link.")
		return
	}
	c.audit.add(r, auditEntry{Action: "sign-in", Result: "signed in with a one-time link"})
	if c.signIn(w, r) {
		http.Redirect(w, r, c.cfg.BasePath+"/", http.StatusSeeOther)
	}
}

// logout ends the request's session at once (the cookie no longer works,
// wherever a copy of it is) and clears the cookie. It is an action: it
// needs the session's CSRF token and the console's own page, so a page
// elsewhere (another port of the same host is same-site, and gets the
// cookie) cannot sign anyone out; a refused sign-out leaves the cookie
// alone and is audited.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(c.cookieName)
	if err != nil || !c.sessions.valid(ck.Value) {
		c.setCookie(w, r, "", -1)
		c.loginPage(w, r, http.StatusOK, "Signed out.")
		return
	}
	why := crossSite(r)
	if why == "" && !equal(r.PostFormValue("csrf"), c.sessions.csrf(ck.Value)) {
		why = "missing or wrong CSRF token"
	}
	if why != "" {
		c.audit.add(r, auditEntry{Action: "sign-out", Result: "refused: " + why})
		c.errorPage(w, r, http.StatusForbidden, "This sign-out did not come from the console's own page ("+why+"); the session goes on. Sign out with the console's button.")
		return
	}
	c.sessions.end(ck.Value)
	c.audit.add(r, auditEntry{Action: "sign-out", Result: "signed out"})
	c.setCookie(w, r, "", -1)
	c.loginPage(w, r, http.StatusOK, "Signed out. The session this browser had no longer works.")
}
