/*
 * The browser-tool runner: the tools that run in the user's page (page_read, page_fill_fields,
 * and any a host page registers) and the claim that makes one window per session run them.
 *
 * Several windows may show the same chat. One of them holds a localStorage "runner" claim per
 * session (1 s heartbeat, stale after 15 s) and is the only one that runs browser tools and
 * nudges a stalled run; the others watch. Sending or approving from a window moves the claim
 * there, because the user is now looking at that page.
 */
import { sessionPath } from "./api.js";
import { sleep } from "./dom.js";

// Browser-result answers that mean "another window (or an earlier try) already answered".
const ALREADY_HANDLED = ["ahentic_not_awaiting", "ahentic_no_pending", "ahentic_call_mismatch"];

let root = null; // the sidebar element: never read, never filled
let pageTextLimit = 4000;

const SKIP_TEXT_TAGS = new Set([
  "SCRIPT",
  "STYLE",
  "NOSCRIPT",
  "TEMPLATE",
  "IFRAME",
  "CANVAS",
  "SVG",
  "TEXTAREA",
  "SELECT",
  "OPTION",
  "INPUT",
  "BUTTON",
]);
const NOT_FILLABLE_TYPES = new Set(["hidden", "submit", "button", "reset", "image", "file"]);
// The server's rule (orchestrator_app/tools/browser_tools.py), served by the template tag.
const sidebarRoot = document.getElementById("ahentic-sidebar");
const SENSITIVE = new RegExp(
  (sidebarRoot && sidebarRoot.dataset.sensitiveFields) || "pass|secret|token|otp",
  "i",
);
const SENSITIVE_AUTOCOMPLETE = new RegExp(
  (sidebarRoot && sidebarRoot.dataset.sensitiveAutocomplete) || "password|one-time-code",
  "i",
);

function collapse(text) {
  return (text || "").replace(/\s+/g, " ").trim();
}

function inSidebar(node) {
  return root.contains(node);
}

function isHidden(element) {
  if (element.hidden || element.getAttribute("aria-hidden") === "true") return true;
  if (typeof element.checkVisibility === "function" && !element.checkVisibility()) {
    // checkVisibility() is also false for display:contents wrappers, whose children show.
    return window.getComputedStyle(element).display !== "contents";
  }
  return false;
}

/** Visible text of a subtree (the sidebar excluded), whitespace collapsed, cut at limit. */
function visibleText(scope, limit) {
  const walker = document.createTreeWalker(
    scope,
    NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT,
    {
      acceptNode(node) {
        if (node.nodeType === Node.TEXT_NODE) return NodeFilter.FILTER_ACCEPT;
        if (node === root || SKIP_TEXT_TAGS.has(node.tagName.toUpperCase()) || isHidden(node)) {
          return NodeFilter.FILTER_REJECT;
        }
        return NodeFilter.FILTER_SKIP;
      },
    },
  );
  const parts = [];
  let length = 0;
  let node;
  while ((node = walker.nextNode())) {
    const text = collapse(node.nodeValue);
    if (!text) continue;
    parts.push(text);
    length += text.length + 1;
    if (length > limit) break;
  }
  const text = parts.join(" ");
  return { text: text.slice(0, limit), truncated: text.length > limit };
}

function labelOf(field) {
  const label = field.labels && field.labels.length ? collapse(field.labels[0].textContent) : "";
  if (label) return label;
  const labelledBy = field.getAttribute("aria-labelledby");
  if (labelledBy) {
    const text = labelledBy
      .split(/\s+/)
      .map((id) => document.getElementById(id))
      .filter(Boolean)
      .map((node) => collapse(node.textContent))
      .join(" ");
    if (text) return text;
  }
  return (
    field.getAttribute("aria-label") || field.getAttribute("placeholder") || field.title || ""
  );
}

function isSensitiveField(field) {
  const type = (field.type || "").toLowerCase();
  return (
    type === "password" ||
    SENSITIVE.test(field.name || "") ||
    SENSITIVE.test(field.id || "") ||
    SENSITIVE_AUTOCOMPLETE.test(field.getAttribute("autocomplete") || "")
  );
}

function describeField(field) {
  const tag = field.tagName.toLowerCase();
  const type = tag === "input" ? (field.type || "text").toLowerCase() : tag;
  const info = { type };
  if (field.name) info.name = field.name;
  if (field.id) info.id = field.id;
  const label = labelOf(field);
  if (label) info.label = label.slice(0, 200);
  if (field.required) info.required = true;
  if (field.disabled) info.disabled = true;
  if (field.readOnly) info.readonly = true;
  if (type === "checkbox" || type === "radio") {
    info.checked = field.checked;
    if (field.value && field.value !== "on") info.value = field.value;
  } else if (tag === "select") {
    info.value = field.value;
    info.options = Array.from(field.options)
      .slice(0, 30)
      .map((option) => ({ value: option.value, text: collapse(option.text) }));
  } else if (type === "file") {
    // never a path
  } else if (isSensitiveField(field)) {
    info.sensitive = true; // the value of a password or secret field never leaves the page
  } else {
    info.value = String(field.value || "").slice(0, 500);
  }
  return info;
}

function pageFields(scope) {
  return Array.from(scope.querySelectorAll("input, textarea, select"))
    .filter((field) => !inSidebar(field))
    .filter(
      (field) => !(field.tagName === "INPUT" && (field.type || "").toLowerCase() === "hidden"),
    )
    .slice(0, 100)
    .map(describeField);
}

function pageHeadings(scope) {
  return Array.from(scope.querySelectorAll("h1, h2, h3, h4, h5, h6"))
    .filter((heading) => !inSidebar(heading) && !isHidden(heading))
    .slice(0, 50)
    .map((heading) => ({
      level: Number(heading.tagName[1]),
      text: collapse(heading.textContent).slice(0, 200),
    }))
    .filter((heading) => heading.text);
}

function pageRead(input) {
  let scope = document.body;
  if (input && input.selector) {
    let found;
    try {
      found = document.querySelector(input.selector);
    } catch (err) {
      throw new Error("Invalid CSS selector: " + input.selector);
    }
    if (!found || inSidebar(found))
      throw new Error("No element on the page matches " + input.selector);
    scope = found;
  }
  const { text, truncated } = visibleText(scope, pageTextLimit);
  const result = {
    ok: true,
    url: window.location.href,
    title: document.title,
    headings: pageHeadings(scope),
    text,
    textTruncated: truncated,
    fields: pageFields(scope),
  };
  if (input && input.selector) result.selector = input.selector;
  return result;
}

function isFillable(field) {
  if (!field || inSidebar(field)) return false;
  if (!/^(INPUT|TEXTAREA|SELECT)$/.test(field.tagName)) return false;
  return !(field.tagName === "INPUT" && NOT_FILLABLE_TYPES.has((field.type || "").toLowerCase()));
}

function findFields(key) {
  const named = Array.from(document.getElementsByName(key)).filter(isFillable);
  if (named.length) return named;
  const byId = document.getElementById(key);
  return isFillable(byId) ? [byId] : [];
}

function truthy(value) {
  return value === true || value === 1 || /^(true|1|on|yes|checked)$/i.test(String(value));
}

function announce(field) {
  // Frameworks (React, Vue...) listen for these; nothing here ever submits the form.
  field.dispatchEvent(new Event("input", { bubbles: true }));
  field.dispatchEvent(new Event("change", { bubbles: true }));
}

function setNativeValue(field, value) {
  // Set through the prototype's setter so frameworks that wrap .value notice the change.
  const prototype = Object.getPrototypeOf(field);
  const descriptor = Object.getOwnPropertyDescriptor(prototype, "value");
  if (descriptor && descriptor.set) descriptor.set.call(field, value);
  else field.value = value;
}

function fillField(fields, value) {
  const first = fields[0];
  if (first.disabled) throw new Error("the field is disabled");
  if (first.readOnly) throw new Error("the field is read-only");
  const type = (first.type || "").toLowerCase();
  if (type === "radio") {
    const match = fields.find((field) => field.value === String(value));
    if (!match) throw new Error("no option with the value " + JSON.stringify(String(value)));
    match.checked = true;
    announce(match);
  } else if (type === "checkbox") {
    const target =
      fields.length > 1 ? fields.find((field) => field.value === String(value)) : first;
    if (!target) throw new Error("no checkbox with the value " + JSON.stringify(String(value)));
    target.checked = fields.length > 1 ? true : truthy(value);
    announce(target);
  } else if (first.tagName === "SELECT") {
    const wanted = String(value);
    const option = Array.from(first.options).find(
      (o) => o.value === wanted || collapse(o.text).toLowerCase() === wanted.toLowerCase(),
    );
    if (!option) throw new Error("no option " + JSON.stringify(wanted));
    setNativeValue(first, option.value);
    announce(first);
  } else {
    setNativeValue(first, String(value));
    announce(first);
  }
}

function pageFillFields(input) {
  const filled = [];
  const notFound = [];
  const failed = {};
  for (const [key, value] of Object.entries((input && input.fields) || {})) {
    const fields = findFields(key);
    if (!fields.length) {
      notFound.push(key);
      continue;
    }
    try {
      fillField(fields, value);
      filled.push(key);
    } catch (err) {
      failed[key] = err.message;
    }
  }
  const ok = notFound.length === 0 && Object.keys(failed).length === 0;
  const result = { ok, filled, submitted: false };
  if (notFound.length) result.notFound = notFound;
  if (Object.keys(failed).length) result.failed = failed;
  if (!ok) {
    result.error = "fields_not_filled";
    result.message =
      "Some fields were not filled; see notFound and failed. Nothing was submitted.";
  }
  return result;
}

/** The tools every page has; host pages add theirs with registerBrowserTool. */
export const browserTools = Object.create(null);
browserTools.page_read = pageRead;
browserTools.page_fill_fields = pageFillFields;

/** One window per session runs its browser tools and stall nudges (see the header). */
export function createRunnerClaim(storage, config, windowId) {
  const key = (id) => "runner:" + id;
  return {
    isMine(id) {
      const claim = storage.read(key(id), null);
      return !!claim && claim.owner === windowId && Date.now() - claim.at < config.runnerStaleMs;
    },
    claim(id, force) {
      const claim = storage.read(key(id), null);
      const free =
        !claim || claim.owner === windowId || Date.now() - claim.at >= config.runnerStaleMs;
      if (force || free) storage.write(key(id), { owner: windowId, at: Date.now() });
      return this.isMine(id);
    },
    release(id) {
      const claim = storage.read(key(id), null);
      if (claim && claim.owner === windowId) storage.remove(key(id));
    },
  };
}

/**
 * Runs pending browser calls for the sidebar `app` ({root, config, client, applyPayload,
 * pollSoon, setError, isOpen}). Each call runs once per window.
 */
export function createBrowserRunner(app) {
  root = app.root;
  pageTextLimit = app.config.pageTextLimit;
  const handled = new Set(); // "sessionId:callId" already run in this window

  async function run(s, pendingTool) {
    const key = s.id + ":" + pendingTool.callId;
    if (handled.has(key)) return;
    handled.add(key);
    const startedAt = Date.now();
    const body = { callId: pendingTool.callId };
    const handler = browserTools[pendingTool.name];
    if (pendingTool.memoryError) {
      body.error = pendingTool.memoryError;
    } else if (!handler) {
      body.error = "This page cannot run the browser tool " + pendingTool.name + ".";
    } else {
      try {
        body.result = await handler(pendingTool.input || {});
      } catch (err) {
        body.error = (err && err.message) || String(err);
      }
    }
    if ("result" in body && body.result === undefined) body.result = null;
    await post(s, body, startedAt);
  }

  async function post(s, body, startedAt) {
    const { config, client } = app;
    for (let attempt = 1; attempt <= config.browserAttempts; attempt += 1) {
      if (s.stoppedAt >= startedAt || !app.isOpen(s)) return; // Stop cancels in-flight resumes
      const result = await client.api("POST", sessionPath(s.id, "browser-results"), body);
      if (result.ok) {
        app.applyPayload(s, result.data, result.etag);
        return;
      }
      const code = result.data && result.data.code;
      if (result.status === 409 || ALREADY_HANDLED.includes(code)) {
        app.pollSoon(s); // someone already answered: show what happened
        return;
      }
      const retryable = result.status === 0 || result.status === 429 || result.status >= 500;
      if (!retryable || attempt === config.browserAttempts) {
        app.setError(s, result.data);
        return;
      }
      await sleep(config.browserBackoffMs * attempt);
    }
  }

  return { run };
}
