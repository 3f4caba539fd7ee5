/*
 * What a screen reader hears: each finished reply of the agent, once, and each request for
 * approval, through one polite live region (the skeleton's data-role="announcer", outside the
 * panel so a folded panel still speaks). The transcript is not a live region: a reply being
 * streamed would be read out token by token. Errors of the sidebar itself are the error line, a
 * role="alert" of its own.
 *
 * A chat that is opened, reloaded or switched to is not read out: its first payload only marks
 * what is already there, and later payloads announce what is new.
 */
import { el } from "./dom.js";
import { gettext } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";

const KEEP_LINES = 3; // earlier announcements leave the region; only additions are read

/** A reply of the agent (its own text or an error it reports), not a sub-agent's report. */
function isReply(message) {
  const meta = message.meta || {};
  return message.kind === "agent_message" && meta.source !== "subagent";
}

/** The reply as it reads on screen: Markdown rendered, blocks and table cells apart. */
function plainText(markdown) {
  const box = document.createElement("div");
  renderMarkdown(box, markdown || "");
  box
    .querySelectorAll("p, li, h1, h2, h3, h4, h5, h6, pre, blockquote, th, td, br")
    .forEach((node) => node.after(" "));
  return box.textContent.replace(/\s+/g, " ").trim();
}

export function createAnnouncer(region) {
  let sessionId = null;
  let heard = new Set();
  let approval = "";

  function say(text) {
    region.append(el("p", { text }));
    while (region.childElementCount > KEEP_LINES) region.firstElementChild.remove();
  }

  /** Announce what is new in the active chat `s` since its last render. */
  function render(s) {
    const p = s && s.payload;
    if (!p) return;
    const replies = (p.messages || []).filter(isReply);
    const waiting = p.status === "awaiting_human" && p.pendingTool ? p.pendingTool.callId : "";
    if (s.id !== sessionId) {
      sessionId = s.id;
      heard = new Set(replies.map((message) => message.id));
      approval = waiting;
      return;
    }
    const fresh = replies.filter((message) => !heard.has(message.id));
    fresh.forEach((message) => heard.add(message.id));
    const reply = fresh.map((message) => plainText(message.content)).filter(Boolean).join(" ");
    if (reply) say(gettext("The agent replied: %(reply)s", { reply }));
    if (waiting && waiting !== approval) {
      const action = p.pendingTool.summary || p.pendingTool.name;
      say(gettext("Approval needed: %(action)s", { action }));
    }
    approval = waiting;
  }

  return { render };
}
