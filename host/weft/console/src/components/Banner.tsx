// The error banner (API errors with their gRPC message) and the token prompt.
import { useState } from "react";
import { submitToken, useAuth } from "../auth";
import { clearError, useErrors } from "../errors";

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
  const [token, setToken] = useState("");
  if (!auth.required) return null;
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
