/*
 * "MCP access": the user's tokens for the site's MCP endpoint (GET/POST mcp-tokens,
 * DELETE mcp-tokens/{id}), opened by the MCP button in the header. A new token is shown once,
 * with a copy button, and never again (only its hash is stored); each token lists its last use
 * and can be revoked (confirmed). Above them, what a client gets (GET mcp-tokens/access): for
 * the chosen agent the endpoint (?agent= unless it is the default), how many tools, and the
 * lines to paste into Claude Code and into a client's JSON config (the new token filled in
 * while it is shown); with no tool, why.
 * Below, "Connected apps": the clients the user connected with OAuth (GET connected-apps,
 * DELETE connected-apps/{id}: revoking deletes their tokens at once). Every text is textContent.
 */
import { el, fill, show } from "./dom.js";
import { gettext, locale, ngettext } from "./i18n.js";

const EXPIRY_CHOICES = [
  ["30", ngettext("%(count)s day", "%(count)s days", 30, { count: 30 })],
  ["90", ngettext("%(count)s day", "%(count)s days", 90, { count: 90 })],
  ["365", gettext("1 year")],
  ["", gettext("Never")],
];

const TOKEN_PLACEHOLDER = "<your token>";

/** The name a client lists the server under: "ahentic", "-<agent>" for another agent. */
function serverName(access) {
  const agent = access.agent;
  return agent && !agent.isDefault ? "ahentic-" + agent.slug : "ahentic";
}

export function claudeCodeLine(access, token) {
  return (
    "claude mcp add --transport http " + serverName(access) + " " + access.endpoint +
    ' --header "Authorization: Bearer ' + (token || TOKEN_PLACEHOLDER) + '"'
  );
}

export function clientConfig(access, token) {
  const server = {
    type: "http",
    url: access.endpoint,
    headers: { Authorization: "Bearer " + (token || TOKEN_PLACEHOLDER) },
  };
  return JSON.stringify({ mcpServers: { [serverName(access)]: server } }, null, 2);
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString(locale()) : gettext("never");
}

export function createMcpTokens(app) {
  const { client, ui } = app;
  const toggle = el("button", {
    type: "button",
    className: "ahentic-icon-button ahentic-mcp-toggle",
    "data-role": "mcp-toggle",
    "aria-pressed": "false",
    "aria-controls": "ahentic-mcp",
    "aria-label": gettext("MCP access"),
    title: gettext("MCP access"),
    text: "MCP",
  });
  ui.debugToggle.before(toggle);

  // What a client gets, for the chosen agent (GET mcp-tokens/access).
  const state = { access: null, secret: "" };
  const agentSelect = el("select", {
    className: "ahentic-select",
    "data-role": "mcp-agent",
    "aria-label": gettext("Agent"),
  });
  const agentRow = el(
    "label",
    { className: "ahentic-mcp-agent" },
    el("span", { text: gettext("Agent") }),
    agentSelect,
  );
  const endpointCode = el("code", { "data-role": "mcp-endpoint" });
  const toolCount = el("p", { className: "ahentic-artifact-meta", "data-role": "mcp-tool-count" });
  const reason = el("p", { className: "ahentic-mcp-reason", "data-role": "mcp-reason" });
  const claudeLine = el("pre", { className: "ahentic-mcp-snippet", "data-role": "mcp-claude-code" });
  const configJson = el("pre", { className: "ahentic-mcp-snippet", "data-role": "mcp-client-config" });
  function copyButton(source, label) {
    return el("button", {
      type: "button",
      className: "ahentic-link",
      text: gettext("Copy"),
      "aria-label": label,
      onclick: () => navigator.clipboard && navigator.clipboard.writeText(source.textContent),
    });
  }
  const snippets = el(
    "div",
    { className: "ahentic-mcp-snippets", "data-role": "mcp-snippets" },
    el("strong", { text: gettext("Claude Code") }),
    claudeLine,
    copyButton(claudeLine, gettext("Copy the Claude Code command")),
    el("strong", { text: gettext("A client's JSON config") }),
    configJson,
    copyButton(configJson, gettext("Copy the client config")),
  );
  const accessBox = el(
    "div",
    { className: "ahentic-mcp-access", "data-role": "mcp-access" },
    agentRow,
    el("p", { className: "ahentic-artifact-meta" }, gettext("Endpoint:") + " ", endpointCode),
    toolCount,
    reason,
    snippets,
  );

  function drawAccess() {
    const access = state.access;
    show(accessBox, !!access);
    if (!access) return;
    endpointCode.textContent = access.endpoint;
    const count = access.tools.length;
    toolCount.textContent = ngettext(
      "%(count)s tool: %(names)s",
      "%(count)s tools: %(names)s",
      count,
      { count, names: access.tools.join(", ") },
    );
    show(toolCount, count > 0);
    reason.textContent = count ? "" : gettext("No tools for an MCP client.") + " " + access.reason;
    show(reason, count === 0);
    claudeLine.textContent = claudeCodeLine(access, state.secret);
    configJson.textContent = clientConfig(access, state.secret);
    show(snippets, count > 0);
    show(agentRow, access.agents.length > 1);
    fill(
      agentSelect,
      access.agents.map((agent) =>
        el("option", {
          value: agent.slug,
          text: agent.isDefault ? gettext("%(name)s (default)", { name: agent.name }) : agent.name,
          selected: !!access.agent && agent.slug === access.agent.slug,
        }),
      ),
    );
  }

  async function loadAccess(slug) {
    const path = "mcp-tokens/access" + (slug ? "?" + new URLSearchParams({ agent: slug }) : "");
    const result = await client.api("GET", path);
    if (!result.ok) return fail(result);
    state.access = result.data;
    drawAccess();
  }
  agentSelect.addEventListener("change", () => loadAccess(agentSelect.value));

  const name = el("input", {
    type: "text",
    className: "ahentic-input",
    "data-role": "mcp-name",
    maxLength: 100,
    placeholder: gettext("Name, e.g. Laptop"),
    "aria-label": gettext("Token name"),
  });
  const expiry = el(
    "select",
    { className: "ahentic-select", "data-role": "mcp-expiry", "aria-label": gettext("Expires after") },
    ...EXPIRY_CHOICES.map(([value, label]) =>
      el("option", { value, text: label, selected: value === "90" }),
    ),
  );
  const create = el("button", {
    type: "submit",
    className: "ahentic-button",
    "data-role": "mcp-create",
    text: gettext("Create token"),
  });
  const form = el("form", { className: "ahentic-mcp-form" }, name, expiry, create);
  const secret = el("code", { "data-role": "mcp-secret" });
  const copy = el("button", { type: "button", className: "ahentic-link", text: gettext("Copy") });
  const issued = el(
    "div",
    { className: "ahentic-mcp-issued", "data-role": "mcp-issued", role: "status" },
    el("p", { text: gettext("Copy this token now: it is not shown again.") }),
    secret,
    copy,
  );
  const error = el("p", { className: "ahentic-error", "data-role": "mcp-error", role: "alert" });
  const list = el("ul", { "data-role": "mcp-tokens" });
  const apps = el("ul", { "data-role": "mcp-apps" });
  const noApps = el("p", {
    className: "ahentic-artifact-meta",
    "data-role": "mcp-no-apps",
    text: gettext("No connected apps."),
  });
  const panel = el(
    "section",
    {
      className: "ahentic-mcp",
      id: "ahentic-mcp",
      "data-role": "mcp-panel",
      "aria-label": gettext("MCP access"),
    },
    el("strong", { text: gettext("MCP access") }),
    el("p", {
      className: "ahentic-artifact-meta",
      text: gettext(
        "Let an MCP client (Claude Code, Claude Desktop...) use this site's tools as you. " +
          "Changes still wait for your approval here.",
      ),
    }),
    accessBox,
    form,
    issued,
    error,
    list,
    el("strong", { text: gettext("Connected apps") }),
    el("p", {
      className: "ahentic-artifact-meta",
      text: gettext("Apps you connected with your login (claude.ai, ChatGPT...)."),
    }),
    apps,
    noApps,
  );
  show(panel, false);
  show(accessBox, false);
  show(issued, false);
  show(error, false);
  ui.error.before(panel);

  function fail(result) {
    error.textContent = (result.data && result.data.detail) || gettext("Request failed.");
    show(error, true);
  }

  async function load() {
    const result = await client.api("GET", "mcp-tokens");
    if (!result.ok) return fail(result);
    const tokens = result.data || [];
    fill(
      list,
      tokens.length
        ? tokens.map((token) =>
            el(
              "li",
              { className: "ahentic-child", "data-token": String(token.id) },
              el("span", { className: "ahentic-child-title", text: token.name }),
              el("span", {
                className: "ahentic-artifact-meta",
                text: [
                  token.prefix + "…",
                  token.expired
                    ? gettext("expired")
                    : gettext("expires %(when)s", { when: when(token.expiresAt) }),
                  gettext("last used %(when)s", { when: when(token.lastUsedAt) }),
                ].join(" · "),
              }),
              el("button", {
                type: "button",
                className: "ahentic-link",
                text: gettext("Revoke"),
                "aria-label": gettext("Revoke %(name)s", { name: token.name }),
                onclick: () => revoke(token),
              }),
            ),
          )
        : el("li", { className: "ahentic-artifact-meta", text: gettext("No tokens yet.") }),
    );
  }

  async function loadApps() {
    const result = await client.api("GET", "connected-apps");
    if (!result.ok) return fail(result);
    const connected = result.data || [];
    show(noApps, !connected.length);
    fill(
      apps,
      ...connected.map((app) =>
            el(
              "li",
              { className: "ahentic-child", "data-app": String(app.id) },
              el("span", { className: "ahentic-child-title", text: app.client }),
              el("span", {
                className: "ahentic-artifact-meta",
                text: [
                  app.agent ? gettext("agent %(agent)s", { agent: app.agent }) : "",
                  app.scopes.includes("tools:write")
                    ? gettext("may call tools that change data")
                    : gettext("tools that change nothing only"),
                  gettext("last used %(when)s", { when: when(app.lastUsedAt) }),
                ]
                  .filter(Boolean)
                  .join(" · "),
              }),
              el("button", {
                type: "button",
                className: "ahentic-link",
                text: gettext("Revoke"),
                "aria-label": gettext("Revoke %(name)s", { name: app.client }),
                onclick: () => revokeApp(app),
              }),
        ),
      ),
    );
  }

  async function revokeApp(app) {
    const question = gettext("Disconnect \"%(name)s\"? It loses access at once.", {
      name: app.client,
    });
    if (!window.confirm(question)) return;
    const result = await client.api("DELETE", "connected-apps/" + app.id);
    if (!result.ok) fail(result);
    await loadApps();
  }

  async function revoke(token) {
    const question = gettext("Revoke \"%(name)s\"? Clients using it lose access at once.", {
      name: token.name,
    });
    if (!window.confirm(question)) return;
    const result = await client.api("DELETE", "mcp-tokens/" + token.id);
    if (!result.ok) fail(result);
    await load();
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    show(error, false);
    const body = { name: name.value.trim() };
    body.expiresInDays = expiry.value ? Number(expiry.value) : null;
    const result = await client.api("POST", "mcp-tokens", body);
    if (!result.ok) return fail(result);
    secret.textContent = result.data.token;
    state.secret = result.data.token;
    drawAccess();
    show(issued, true);
    name.value = "";
    await load();
  });
  copy.addEventListener("click", () => {
    if (navigator.clipboard) navigator.clipboard.writeText(secret.textContent);
  });
  toggle.addEventListener("click", () => {
    const open = panel.hidden;
    show(panel, open);
    toggle.setAttribute("aria-pressed", String(open));
    if (open) {
      load();
      loadApps();
      loadAccess(state.access && state.access.agent ? state.access.agent.slug : null);
    } else {
      // Closing forgets the shown secret: it is never displayed again.
      secret.textContent = "";
      state.secret = "";
      drawAccess();
      show(issued, false);
    }
  });

  return { load, loadApps };
}
