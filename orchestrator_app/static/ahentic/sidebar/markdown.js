/*
 * Markdown for model text: markdown-it (raw HTML off, images off) turns the text into HTML,
 * DOMPurify keeps only the tags a reply needs, and links are limited to http, https and mailto
 * and open in a new tab with rel="noopener noreferrer". Images are off on purpose: an image
 * URL loads by itself, so a reply could leak chat text to any server through its query string.
 *
 * renderMarkdown(container, text) replaces the container's content and may be called again with
 * a longer text (a reply that is still being written): unfinished Markdown (an open code fence,
 * a half table) renders as far as it goes, and the result is always a closed, sanitized tree.
 */
import markdownit from "../vendor/markdown-it/markdown-it.esm.min.js";
import createDOMPurify from "../vendor/dompurify/purify.es.js";

import { el } from "./dom.js";
import { gettext } from "./i18n.js";

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

const ALLOWED_TAGS = [
  "a",
  "p",
  "br",
  "hr",
  "h1",
  "h2",
  "h3",
  "h4",
  "h5",
  "h6",
  "strong",
  "em",
  "s",
  "code",
  "pre",
  "blockquote",
  "ul",
  "ol",
  "li",
  "table",
  "thead",
  "tbody",
  "tr",
  "th",
  "td",
];
const ALLOWED_ATTR = ["href", "title", "start"];

/** True for a link the sidebar may show: http(s) or mailto, relative links resolved first. */
export function isSafeHref(href) {
  try {
    return SAFE_PROTOCOLS.has(new URL(href, document.baseURI).protocol);
  } catch (err) {
    return false;
  }
}

const md = markdownit({ html: false, linkify: true, breaks: true, typographer: false });
md.disable(["image"]);
md.validateLink = isSafeHref;

// An instance of our own: hooks on the shared default would reach a host page's DOMPurify.
const purifier = createDOMPurify(window);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName !== "A") return;
  const href = node.getAttribute("href");
  if (!href || !isSafeHref(href)) {
    node.removeAttribute("href");
    return;
  }
  node.setAttribute("target", "_blank");
  node.setAttribute("rel", "noopener noreferrer");
});

function sanitize(html) {
  return purifier.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i,
    RETURN_DOM_FRAGMENT: true,
  });
}

export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  // Plain http pages have no async clipboard: copy through a selected, off-screen textarea.
  const area = el("textarea", { className: "ahentic-copy-buffer", readonly: true });
  area.value = text;
  document.body.append(area);
  area.select();
  try {
    if (!document.execCommand("copy")) throw new Error("copy refused");
  } finally {
    area.remove();
  }
}

function copyButton(code) {
  const button = el("button", {
    type: "button",
    className: "ahentic-copy",
    "aria-label": gettext("Copy code"),
    text: gettext("Copy"),
  });
  button.addEventListener("click", async () => {
    try {
      await copyText(code.textContent);
      button.textContent = gettext("Copied");
    } catch (err) {
      button.textContent = gettext("Copy failed");
    }
    setTimeout(() => (button.textContent = gettext("Copy")), 1500);
  });
  return button;
}

/** Code blocks get a copy button and scroll sideways; tables scroll inside their own box. */
function decorate(fragment) {
  for (const pre of fragment.querySelectorAll("pre")) {
    const code = pre.querySelector("code") || pre;
    const box = el("div", { className: "ahentic-md-code" });
    pre.replaceWith(box);
    box.append(copyButton(code), pre);
  }
  for (const table of fragment.querySelectorAll("table")) {
    const box = el("div", { className: "ahentic-md-table" });
    table.replaceWith(box);
    box.append(table);
  }
  return fragment;
}

/** Render a reply's Markdown text into container (its previous content is replaced). */
export function renderMarkdown(container, text) {
  container.classList.add("ahentic-md");
  container.replaceChildren(decorate(sanitize(md.render(String(text || "")))));
}

/** One line of Markdown (a plan step, an approval summary): emphasis, code and links only. */
export function renderInlineMarkdown(container, text) {
  container.classList.add("ahentic-md-inline");
  container.replaceChildren(sanitize(md.renderInline(String(text || ""))));
}
