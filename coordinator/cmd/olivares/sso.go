package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// DefaultSSOListen is where olivares login --sso waits for the identity
// provider's answer. Register http://127.0.0.1:8250/oidc/callback as a
// redirect URI of the coordinator's client at the provider.
const DefaultSSOListen = "127.0.0.1:8250"

// ssoCallbackPath is the loopback redirect's path.
const ssoCallbackPath = "/oidc/callback"

// ssoWait bounds the whole sign-in in the browser.
const ssoWait = 10 * time.Minute

type ssoStart struct {
	AuthURL string `json:"auth_url"`
	Flow    string `json:"flow"`
}

type ssoSession struct {
	apitypes.Tenants
	Token string `json:"token"`
}

// loginSSO signs in with the coordinator's identity provider: the
// coordinator starts the flow for a loopback redirect here, the person
// signs in in a browser, the provider sends the browser back to listen,
// and the coordinator completes the flow into a session credential.
func loginSSO(ctx context.Context, creds Credentials, listen string, openBrowser bool, out, errOut io.Writer) (Credentials, ssoSession, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return creds, ssoSession{}, fmt.Errorf("login --sso: cannot listen on %s for the identity provider's answer (%v); pass --listen 127.0.0.1:PORT with a port registered at the provider", listen, err)
	}
	defer ln.Close()
	redirect := "http://" + ln.Addr().String() + ssoCallbackPath
	cl, err := newClient(creds, callTimeout)
	if err != nil {
		return creds, ssoSession{}, err
	}
	var st ssoStart
	if err := ssoPost(ctx, cl, "/v1/sso/start", map[string]string{"redirect_uri": redirect}, &st); err != nil {
		var ae *apiclient.Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return creds, ssoSession{}, fmt.Errorf("login --sso: the coordinator at %s has no single sign-on configured (an [oidc] table); use olivares login --token", creds.URL)
		}
		return creds, ssoSession{}, fmt.Errorf("login --sso: %w", err)
	}
	au, err := neturl.Parse(st.AuthURL)
	if err != nil {
		return creds, ssoSession{}, fmt.Errorf("login --sso: the coordinator's authorization URL: %w", err)
	}
	state := au.Query().Get("state")

	type answer struct{ q neturl.Values }
	answers := make(chan answer, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != ssoCallbackPath {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if q.Get("state") != state {
			// Not this sign-in's answer (another tab, a stale page).
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, page("This is not the answer to the sign-in olivares is waiting for. Start again with olivares login --sso."))
			return
		}
		msg := "Signed in. You can close this tab and go back to the terminal."
		if e := q.Get("error"); e != "" {
			msg = "The identity provider refused the sign-in: " + e + ". See the terminal."
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page(msg))
		select {
		case answers <- answer{q}:
		default:
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()

	fmt.Fprintf(out, "Sign in in your browser:\n  %s\n", st.AuthURL)
	if openBrowser {
		if err := browse(st.AuthURL); err != nil {
			fmt.Fprintf(errOut, "(could not open a browser: %v; open the address above)\n", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, ssoWait)
	defer cancel()
	var a answer
	select {
	case a = <-answers:
	case <-wctx.Done():
		return creds, ssoSession{}, fmt.Errorf("login --sso: no answer from the identity provider within %v; run olivares login --sso again", ssoWait)
	}
	var sess ssoSession
	err = ssoPost(ctx, cl, "/v1/sso/complete", map[string]string{
		"flow": st.Flow, "state": a.q.Get("state"), "code": a.q.Get("code"),
		"error": a.q.Get("error"), "error_description": a.q.Get("error_description"),
	}, &sess)
	if err != nil {
		return creds, ssoSession{}, fmt.Errorf("login --sso refused: %w", err)
	}
	creds.Token = sess.Token
	if creds.Tenant == "" {
		var ids []string
		for _, t := range sess.Items {
			ids = append(ids, t.ID)
		}
		slices.Sort(ids)
		if len(ids) != 1 {
			return creds, sess, usageError{fmt.Errorf("login --sso: you are a member of the tenants %s; pass --tenant", strings.Join(ids, ", "))}
		}
		creds.Tenant = ids[0]
	}
	return creds, sess, nil
}

// ssoPost posts body to a single sign-on route (they need no credential
// and no tenant) and decodes a 2xx answer into out.
func ssoPost(ctx context.Context, cl *apiclient.Client, path string, body, out any) error {
	resp, err := cl.Do(ctx, http.MethodPost, path, body, nil)
	if err != nil {
		return err
	}
	if err := resp.Err(); err != nil {
		return err
	}
	return json.Unmarshal(resp.Body, out)
}

func page(msg string) string {
	return "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Olivares</title></head><body><p>" + html.EscapeString(msg) + "</p></body></html>"
}

// browse opens u in the person's browser.
func browse(u string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, u)
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait()
	return nil
}
