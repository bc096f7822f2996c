// History-API routing: the current location as a React value, navigate(),
// and <Link> for in-app anchors that still work with middle-click.
import { useSyncExternalStore, type AnchorHTMLAttributes, type MouseEvent } from "react";
import { parseRoute, type Route } from "./routes";

const NAV_EVENT = "weft:navigate";

function subscribe(l: () => void): () => void {
  window.addEventListener("popstate", l);
  window.addEventListener(NAV_EVENT, l);
  return () => {
    window.removeEventListener("popstate", l);
    window.removeEventListener(NAV_EVENT, l);
  };
}

const snapshot = () => window.location.pathname + window.location.search;

export function useRoute(): Route {
  const loc = useSyncExternalStore(subscribe, snapshot);
  const q = loc.indexOf("?");
  return parseRoute(q < 0 ? loc : loc.slice(0, q), q < 0 ? "" : loc.slice(q));
}

export function navigate(href: string, opts: { replace?: boolean } = {}): void {
  if (href === snapshot()) return;
  if (opts.replace) window.history.replaceState(null, "", href);
  else window.history.pushState(null, "", href);
  window.dispatchEvent(new Event(NAV_EVENT));
}

/** A plain click navigates in place; modified clicks keep the browser's behaviour. */
export function onLinkClick(e: MouseEvent, href: string): void {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(href);
}

export function Link(props: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }) {
  const { href, onClick, ...rest } = props;
  return (
    <a
      href={href}
      {...rest}
      onClick={(e) => {
        onClick?.(e);
        onLinkClick(e, href);
      }}
    />
  );
}
