/*
 * Small DOM and formatting helpers shared by the sidebar's modules. Strings given to el() and
 * fill() become text nodes: nothing here ever parses HTML.
 */

import { gettext, locale, ngettext } from "./i18n.js";

/** Build an element. Strings among children become text nodes (never HTML). */
export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value == null || value === false) continue;
    if (key === "className") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child != null && child !== false) node.append(child);
  }
  return node;
}

export function show(node, visible) {
  node.hidden = !visible;
}

/** Replace a node's children; null/false entries are skipped (replaceChildren would print
 * them as the text "null"). */
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((child) => child != null && child !== false));
}

const renderKeys = new WeakMap();

/** True when a region must be rebuilt: what it shows changed since the last render. Skipping
 * identical rebuilds keeps keyboard focus and open <details> across 650 ms polls. */
export function changed(node, key) {
  if (renderKeys.get(node) === key) return false;
  renderKeys.set(node, key);
  return true;
}

export function camel(name) {
  return name.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
}

// Numbers in the page's language (locale(): the <html lang>): "1.5k" in English, "1,5k" in
// German. `digits`: the fraction digits shown, always that many.
export function formatNumber(n, digits = 0) {
  const options = { minimumFractionDigits: digits, maximumFractionDigits: digits };
  return new Intl.NumberFormat(locale(), options).format(Number(n) || 0);
}

export function formatTokens(n) {
  n = Number(n) || 0;
  if (n >= 1e6) return formatNumber(n / 1e6, 1) + "M";
  if (n >= 1e3) return formatNumber(n / 1e3, 1) + "k";
  return formatNumber(n);
}

export function formatBytes(n) {
  n = Number(n) || 0;
  if (n >= 1048576) return formatNumber(n / 1048576, 1) + " MB";
  if (n >= 1024) return formatNumber(n / 1024, 1) + " KB";
  return ngettext("%(count)s byte", "%(count)s bytes", n, { count: formatNumber(n) });
}

/** A whole percentage: "50%" in English, "50 %" in German. */
export function formatPercent(percent) {
  return new Intl.NumberFormat(locale(), { style: "percent" }).format((Number(percent) || 0) / 100);
}

/** US dollars, four fraction digits under $1: "$0.0123", in German "0,0123 $". */
export function formatUsd(amount) {
  const digits = amount < 1 ? 4 : 2;
  const options = { style: "currency", currency: "USD", minimumFractionDigits: digits };
  return new Intl.NumberFormat(locale(), { ...options, maximumFractionDigits: digits }).format(
    Number(amount) || 0,
  );
}

export function previewJson(value, limit) {
  let text;
  try {
    text = JSON.stringify(value, null, 2);
  } catch (err) {
    text = String(value);
  }
  text = text === undefined ? "" : text;
  return text.length > limit ? text.slice(0, limit) + "\n…" : text;
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function button(label, onclick, className) {
  return el("button", { type: "button", className: className || "ahentic-button", text: label, onclick });
}

/**
 * Text cut to `limit` characters with a "Show more" toggle for the whole of it. `render(node,
 * text)` fills the text node (textContent by default; the Markdown renderer for summaries).
 * `expanded` is a {value} box kept by the caller, so a rebuild keeps the reader's choice.
 */
export function shortened(text, limit, options) {
  const opts = options || {};
  const render = opts.render || ((node, value) => (node.textContent = value));
  const box = opts.expanded || { value: false };
  const body = el("span", { className: "ahentic-short-text" });
  const wrapper = el("span", { className: "ahentic-short" + (opts.className ? " " + opts.className : "") }, body);
  text = String(text || "");
  if (text.length <= limit) {
    render(body, text);
    return wrapper;
  }
  const toggle = el("button", { type: "button", className: "ahentic-link ahentic-more" });
  const paint = () => {
    render(body, box.value ? text : text.slice(0, limit).trimEnd() + "…");
    toggle.textContent = box.value ? gettext("Show less") : gettext("Show more");
    toggle.setAttribute("aria-expanded", String(box.value));
  };
  toggle.addEventListener("click", () => {
    box.value = !box.value;
    paint();
  });
  paint();
  wrapper.append(" ", toggle);
  return wrapper;
}
