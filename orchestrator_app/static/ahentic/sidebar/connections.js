/*
 * Connections: the MCP servers the user's agents use (GET mcp-servers) and the user's own
 * connection to each. A server that takes per-user credentials offers "Connect": paste a
 * personal token (POST mcp-servers/{slug}/connect {token}) or "Connect with OAuth" (the same
 * route with no token answers the URL to open; the callback window tells this page when it is
 * done). "Revoke" deletes the connection. A token is never shown back: only its hint (••••abcd).
 * The header button shows only when some server is listed; the list reloads when it opens.
 */
import { el, fill, show } from "./dom.js";
import { gettext } from "./i18n.js";

const PATH = "mcp-servers";
const CONNECTED_MESSAGE = "ahentic-mcp-connected";
const WAIT_MS = 5 * 60 * 1000; // how long an OAuth window is waited for
const WAIT_STEP_MS = 2000;

function stateText(server) {
  if (server.auth === "none") return gettext("No sign-in needed");
  if (server.auth === "site") {
    return server.connected ? gettext("Connected by the site") : gettext("Not set up by the site yet");
  }
  if (!server.connected) return gettext("Not connected");
  if (server.kind === "oauth") return gettext("Connected (OAuth)");
  if (server.hint) return gettext("Connected (token %(hint)s)", { hint: server.hint });
  return gettext("Connected (token)");
}

export function createConnections(app) {
  const { client, ui } = app;
  const button = el("button", {
    type: "button",
    className: "ahentic-icon-button",
    "data-role": "connections-toggle",
    "aria-pressed": "false",
    "aria-label": gettext("Connections"),
    title: gettext("Connections"),
    text: "⚯",
  });
  const box = el("section", {
    className: "ahentic-connections",
    "data-role": "connections",
    "aria-label": gettext("Connections"),
  });
  const list = el("ul", { className: "ahentic-connection-list" });
  const message = el("p", { className: "ahentic-artifact-meta", role: "status" });
  box.append(el("strong", { text: gettext("Connections") }), list, message);
  show(box, false);
  show(button, false);
  const header = ui.debugToggle || (ui.panel && ui.panel.querySelector("header"));
  if (header && header.parentNode) header.parentNode.insertBefore(button, header);
  const after = ui.error || ui.panel.firstChild;
  after.parentNode.insertBefore(box, after);

  let servers = [];

  async function load() {
    const result = await client.api("GET", PATH);
    servers = result.ok && result.data ? result.data.servers || [] : [];
    show(button, servers.length > 0);
    draw();
  }

  function say(text) {
    message.textContent = text || "";
  }

  async function connect(server, token) {
    say("");
    // OAuth: the window opens now, while the click still counts (a popup blocker lets it
    // through), and goes to the provider's page once the server answers its URL.
    const popup = token ? null : window.open("", "ahentic-mcp-oauth", "width=600,height=700");
    const body = token ? { token } : {};
    const result = await client.api("POST", PATH + "/" + encodeURIComponent(server.slug) + "/connect", body);
    if (!result.ok) {
      if (popup) popup.close();
      say((result.data && result.data.detail) || gettext("Could not connect."));
      return;
    }
    if (result.data && result.data.authorizationUrl) {
      if (popup) popup.location.href = result.data.authorizationUrl;
      else window.open(result.data.authorizationUrl, "ahentic-mcp-oauth", "width=600,height=700");
      say(gettext("Finish signing in in the window that opened."));
      waitFor(server.slug);
      return;
    }
    await load();
  }

  // The callback page posts CONNECTED_MESSAGE, but a Cross-Origin-Opener-Policy (Django's
  // default "same-origin") cuts the window from this page once it visits the provider: the
  // list is also asked again every few seconds until the server shows connected.
  let waiting = null;
  function waitFor(slug) {
    clearInterval(waiting);
    const until = Date.now() + WAIT_MS;
    waiting = setInterval(async () => {
      await load();
      const found = servers.find((s) => s.slug === slug);
      if ((found && found.connected) || Date.now() > until) {
        clearInterval(waiting);
        if (found && found.connected) say("");
      }
    }, WAIT_STEP_MS);
  }

  async function revoke(server) {
    const question = gettext("Disconnect %(name)s? The agent can no longer use it as you.", {
      name: server.name,
    });
    if (!window.confirm(question)) return;
    const result = await client.api("DELETE", PATH + "/" + encodeURIComponent(server.slug) + "/connection");
    if (!result.ok) say((result.data && result.data.detail) || gettext("Could not disconnect."));
    await load();
  }

  function row(server) {
    const controls = [];
    if (server.auth === "user" && server.connected) {
      controls.push(
        el("button", { type: "button", className: "ahentic-link", text: gettext("Revoke"), onclick: () => revoke(server) }),
      );
    } else if (server.auth === "user") {
      const input = el("input", {
        type: "password",
        className: "ahentic-input",
        autocomplete: "off",
        placeholder: gettext("Paste a personal token"),
        "aria-label": gettext("Personal token for %(name)s", { name: server.name }),
      });
      controls.push(
        input,
        el("button", {
          type: "button",
          className: "ahentic-button",
          text: gettext("Save token"),
          onclick: () => input.value.trim() && connect(server, input.value.trim()),
        }),
        el("button", {
          type: "button",
          className: "ahentic-button",
          text: gettext("Connect with OAuth"),
          onclick: () => connect(server, null),
        }),
      );
    }
    return el(
      "li",
      { className: "ahentic-child", "data-server": server.slug },
      el("span", { className: "ahentic-child-title", text: server.name }),
      el("span", { className: "ahentic-artifact-meta", "data-role-state": "state", text: stateText(server) }),
      controls,
    );
  }

  function draw() {
    fill(list, servers.length ? servers.map(row) : el("li", { className: "ahentic-artifact-meta", text: gettext("No servers.") }));
  }

  button.addEventListener("click", () => {
    const open = box.hidden;
    show(box, open);
    button.setAttribute("aria-pressed", String(open));
    if (open) load();
  });
  window.addEventListener("message", (event) => {
    if (event.origin === window.location.origin && event.data && event.data.type === CONNECTED_MESSAGE) {
      say("");
      load();
    }
  });
  load();
  return { load };
}
