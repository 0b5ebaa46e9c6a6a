package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
)

const cookieName = "acemq_console"

// csrfToken derives the CSRF token from the console token: a page that
// can read it was served to someone holding the token.
func csrfToken(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("acemq-console-csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// authed reports whether r carries the token (cookie or bearer header).
func (c *Console) authed(r *http.Request) bool {
	if ck, err := r.Cookie(cookieName); err == nil && equal(ck.Value, c.cfg.Token) {
		return true
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && equal(t, c.cfg.Token) {
		return true
	}
	return false
}

// guard wraps a page: without the token it answers 401 with the login
// form; a ?token= in the URL is exchanged for a cookie and removed from
// the address (so it is not left in history or logs).
func (c *Console) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if t := r.URL.Query().Get("token"); t != "" {
			if !equal(t, c.cfg.Token) {
				c.loginPage(w, r, http.StatusUnauthorized, "That token is not this console's; copy the URL the console printed when it started.")
				return
			}
			c.setCookie(w)
			q := r.URL.Query()
			q.Del("token")
			u := url.URL{Path: c.cfg.BasePath + r.URL.Path, RawQuery: q.Encode()}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
		if !c.authed(r) {
			c.loginPage(w, r, http.StatusUnauthorized, "")
			return
		}
		h(w, r)
	}
}

// action wraps a state-changing handler: POST only, the token, the CSRF
// token from the form, a same-origin Origin header when the browser sends
// one, and refused on a read-only console.
func (c *Console) action(name string, h http.HandlerFunc) http.HandlerFunc {
	return c.guard(func(w http.ResponseWriter, r *http.Request) {
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
		if !equal(r.PostFormValue("csrf"), c.csrf) || !sameOrigin(r) {
			c.audit.add(r, auditEntry{Action: name, Queue: queue, Result: "refused: missing or wrong CSRF token"})
			c.errorPage(w, r, http.StatusForbidden, "This request did not come from the console's own page (CSRF check failed); reload the page and try again.")
			return
		}
		h(w, r)
	})
}

// sameOrigin accepts a request that a browser marks as coming from this
// origin (Sec-Fetch-Site), and otherwise one whose Origin header, when
// present, names the host it was sent to. Clients that send neither (curl
// with the token) rely on the CSRF token alone.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (c *Console) setCookie(w http.ResponseWriter) {
	path := c.cfg.BasePath
	if path == "" {
		path = "/"
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c.cfg.Token, Path: path, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// login takes the token from the login form.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !equal(r.PostFormValue("token"), c.cfg.Token) {
		c.loginPage(w, r, http.StatusUnauthorized, "That token is not this console's; copy the URL the console printed when it started.")
		return
	}
	c.setCookie(w)
	http.Redirect(w, r, c.cfg.BasePath+"/", http.StatusSeeOther)
}
