/*
 * What a reply carries besides its text (meta of an assistant message, see the session API):
 *
 * - meta.thinking {text, redacted} and meta.thinkingMs: a collapsed "Thought for N s" above the
 *   reply; the summarized thinking shows on demand. The debug view also lists every block the
 *   model sent (meta.blocks), signatures included.
 * - meta.citations [{index, url, title, citedText}]: the reply's "[n]" markers become numbered
 *   links to the cited page, and a list of sources follows the text. Only http and https links
 *   are made (the server leaves other schemes out too); they open in a new tab with
 *   rel="noopener noreferrer".
 *
 * decorateReply(node, message, viewMode, body, thinking) adds both to a reply bubble built by
 * transcript.js (body: the reply's text element, or one part of a bubble that holds a turn's
 * replies; thinking false: the bubble shows one fold for all its parts, thinkingNode).
 */
import { el } from "./dom.js";
import { gettext } from "./i18n.js";

const SAFE_SCHEMES = /^https?:\/\//i;
const MARKER = /\[(\d+)\]/g;

/** One fold for the thinking of a reply's messages (a turn that thought before each tool
 * call is still one reply: one "Thought for N s", the times added up). Null without any. */
export function thinkingNode(metas, viewMode) {
  const thought = metas.filter((meta) => meta && meta.thinking);
  if (!thought.length) return null;
  const ms = thought.reduce((sum, meta) => sum + (meta.thinkingMs || 0), 0);
  const seconds = Math.max(1, Math.round(ms / 1000));
  const lines = [];
  for (const meta of thought) {
    if (meta.thinking.text) {
      lines.push(el("div", { className: "ahentic-thinking-text", text: meta.thinking.text }));
    }
  }
  if (thought.some((meta) => meta.thinking.redacted)) {
    const note = gettext("Part of the reasoning is withheld.");
    lines.push(el("div", { className: "ahentic-thinking-note", text: note }));
  }
  if (viewMode === "debug") {
    const blocks = thought.flatMap((meta) =>
      (meta.blocks || []).filter((b) => b.type === "thinking" || b.type === "redacted_thinking"),
    );
    if (blocks.length) {
      const whole = JSON.stringify(blocks, null, 2);
      lines.push(el("pre", { className: "ahentic-thinking-blocks", text: whole }));
    }
  }
  return el(
    "details",
    { className: "ahentic-thinking", open: viewMode === "debug" },
    el("summary", { text: gettext("Thought for %(seconds)s s", { seconds }) }),
    lines,
  );
}

function citationLink(source) {
  return el("a", {
    className: "ahentic-cite",
    href: source.url,
    target: "_blank",
    rel: "noopener noreferrer",
    title: source.title,
    text: "[" + source.index + "]",
  });
}

/** Replace "[n]" in the rendered text (outside code and links) with links to source n. */
function linkMarkers(body, sources) {
  const walker = document.createTreeWalker(body, NodeFilter.SHOW_TEXT);
  const found = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (node.parentElement.closest("code, pre, a")) continue;
    if (MARKER.test(node.data)) found.push(node);
    MARKER.lastIndex = 0;
  }
  for (const node of found) {
    const parts = [];
    let last = 0;
    for (const match of node.data.matchAll(MARKER)) {
      const source = sources.get(Number(match[1]));
      if (!source) continue;
      parts.push(node.data.slice(last, match.index), citationLink(source));
      last = match.index + match[0].length;
    }
    if (!parts.length) continue;
    parts.push(node.data.slice(last));
    node.replaceWith(...parts.filter((part) => part !== ""));
  }
}

function sourcesNode(sources) {
  return el(
    "ol",
    { className: "ahentic-sources", "aria-label": gettext("Sources") },
    [...sources.values()].map((source) =>
      el(
        "li",
        { value: source.index },
        el("a", {
          href: source.url,
          target: "_blank",
          rel: "noopener noreferrer",
          text: source.title || source.url,
        }),
      ),
    ),
  );
}

export function decorateReply(
  node,
  message,
  viewMode,
  body = node.querySelector(".ahentic-msg-text"),
  thinking = true,
) {
  const meta = message.meta || {};
  if (thinking && meta.thinking) body.before(thinkingNode([meta], viewMode));
  const sources = new Map(
    (meta.citations || [])
      .filter((source) => SAFE_SCHEMES.test(String(source.url)))
      .map((source) => [source.index, source]),
  );
  if (sources.size) {
    linkMarkers(body, sources);
    body.after(sourcesNode(sources));
  }
  if (!message.content) body.hidden = true; // a turn that only thought or searched
  return node;
}
