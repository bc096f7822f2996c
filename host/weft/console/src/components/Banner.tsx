// The error banner (API errors with their gRPC message), the token prompt
// and, under single sign-on, the sign-in prompt.
import { useState } from "react";
import { submitToken, useAuth } from "../auth";
import { clearError, useErrors } from "../errors";
import { sso, useSso, type SignIn } from "../sso";

export function ErrorBanner() {
  const errors = useErrors();
  if (errors.length === 0) return null;
  return (
    <div className="banner" role="alert" data-testid="error">
      {errors.map((e) => (
        <div key={e.source} className="banner-line">
          <span className="banner-text">{e.text}</span>
          <button type="button" className="link-button" aria-label="Dismiss" onClick={() => clearError(e.source)}>
            ✕
          </button>
        </div>
      ))}
    </div>
  );
}

export function TokenPrompt() {
  const auth = useAuth();
  const mode = useSso().mode;
  const [token, setToken] = useState("");
  // Under single sign-on nobody pastes tokens (see SignInPrompt).
  if (!auth.required || mode === "sso") return null;
  return (
    <div className="modal-backdrop">
      <form
        className="modal"
        aria-labelledby="auth-title"
        onSubmit={(e) => {
          e.preventDefault();
          if (token.trim() === "") return;
          submitToken(token);
          setToken("");
        }}
      >
        <h2 id="auth-title">Token required</h2>
        <p data-testid="auth-required" className="auth-required">
          The Weft API refused the request{auth.reason ? `: ${auth.reason}` : "."}
        </p>
        <p className="muted">
          Enter a bearer token. It is kept in this tab's session storage only, until you forget it or close the tab.
        </p>
        <input
          data-testid="token-input"
          type="password"
          autoComplete="off"
          autoFocus
          aria-label="Bearer token"
          placeholder="token"
          value={token}
          onChange={(e) => setToken(e.target.value)}
        />
        <div className="modal-actions">
          <button type="submit" className="primary" data-testid="token-submit">
            Use token
          </button>
        </div>
      </form>
    </div>
  );
}

/**
 * Under single sign-on, while the browser leaves for the identity provider
 * ("Signing in…"), or when it will not go by itself (a loop was cut, or
 * the user signed out): the reason and a "Sign in" button.
 */
export function SignInPrompt() {
  const s = useSso();
  if (s.mode !== "sso" || !s.signIn) return null;
  return (
    <div className="modal-backdrop">
      <SignInDialog signIn={s.signIn} issuer={s.issuer} onSignIn={sso.signInNow} />
    </div>
  );
}

/** The dialog itself: pure, so it renders in unit tests. */
export function SignInDialog({ signIn, issuer, onSignIn }: { signIn: SignIn; issuer: string | null; onSignIn: () => void }) {
  if (signIn.phase === "redirecting") {
    return (
      <div className="modal" role="status" data-testid="signing-in">
        <h2>Signing in…</h2>
        <p className="muted">Going to the identity provider{issuer ? ` (${issuer})` : ""}.</p>
      </div>
    );
  }
  return (
    <div className="modal" role="dialog" aria-labelledby="sign-in-title">
      <h2 id="sign-in-title">{signIn.signedOut ? "Signed out" : "Sign in"}</h2>
      {signIn.signedOut ? (
        <p data-testid="sign-in-reason">You signed out of the Weft console.</p>
      ) : (
        <p data-testid="sign-in-reason" className="auth-required">
          Not signed in{signIn.reason ? `: ${signIn.reason}` : "."}
        </p>
      )}
      <p className="muted">Sign in with your organisation's identity provider{issuer ? ` (${issuer})` : ""}.</p>
      <div className="modal-actions">
        <button type="button" className="primary" data-testid="sign-in" onClick={onSignIn} autoFocus>
          Sign in
        </button>
      </div>
    </div>
  );
}
