// The console's core module: sign-in, the tenant picker, hash routing (each page is a module of
// its own, loaded when it first opens) and the helpers every page uses. It talks only to the
// gateway's API with the key kept in this tab's sessionStorage; it renders text with textContent
// (never innerHTML of data) and loads nothing from elsewhere.

const KEY = "rg.apiKey";
const TENANT = "rg.tenant";
export const page = document.getElementById("page");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const signin = document.getElementById("signin");
export const state = { me: null, tenants: null, timers: new Set() };

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error && body.error.code;
  }
}

export function authHeaders(extra = {}) {
  return { authorization: `Bearer ${sessionStorage.getItem(KEY)}`, ...extra };
}

export async function api(path, params = {}, init = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  const headers = authHeaders(init.body !== undefined ? { "content-type": "application/json" } : {});
  const answer = await fetch(url, {
    method: init.method || "GET", headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  if (init.raw) {
    if (!answer.ok) throw new ApiError(answer.status, await answer.json().catch(() => null));
    return answer;
  }
  const body = await answer.json().catch(() => null);
  if (!answer.ok) throw new ApiError(answer.status, body);
  return body;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

// --- Formatting ---------------------------------------------------------------------------

export const utc = (seconds) => new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
export const utcTime = (ms) => new Date(ms).toISOString().slice(11, 19);
export const utcDay = (ms) => new Date(ms).toISOString().slice(0, 10);
const group3 = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
export const int = (n) => (n === null || n === undefined ? "–" : group3(Math.round(n)));
export function ms(value) {
  if (value === null || value === undefined || value === "") return "–";
  const n = Number(value);
  if (n >= 10000) return `${(n / 1000).toFixed(1)} s`;
  if (n >= 1000) return `${(n / 1000).toFixed(2)} s`;
  return `${Math.round(n)} ms`;
}
export function usd(value) {
  const n = Number(value || 0);
  if (n === 0) return "$0";
  if (n < 1) return `$${Number(n.toPrecision(3))}`;  // three significant digits of small sums
  return `$${n.toFixed(n < 100 ? 2 : 0)}`;
}
export const pct = (rate) => (rate === null || rate === undefined ? "–" : `${(100 * rate).toFixed(rate < 0.1 ? 1 : 0)}%`);
export function shortId(id, keep = 8) {
  const text = String(id || "");
  const cut = text.indexOf("_") + 1;
  return text.length <= cut + keep + 1 ? text : `${text.slice(0, cut + keep)}…`;
}
export const clientId = (r) => {
  const c = r.client || {};
  return c.thread_id || c.session_id || c.trace_id || c.client_request_id || "";
};

export function idLink(href, id, label) {
  return el("a", { href, title: id, class: "id", text: label || shortId(id) });
}

export function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== "")
    .map(([k, v]) => [el("dt", { text: k }), el("dd", {}, v instanceof Node ? v : String(v))]));
}

export function badge(status) {
  return el("span", { class: `badge status-${status}`, text: status });
}

export function emptyState(title, ...body) {
  return el("div", { class: "empty", role: "note" }, el("p", { class: "empty-title", text: title }), body);
}

export function code(text) {
  return el("pre", { class: "code" }, el("code", { text }));
}

/** A table in a wrapper that scrolls on its own; columns are labels or [label, class]
 * ("num": right-aligned figures, "wide": hidden on phones). */
export function table(label, columns, rows) {
  return el("div", { class: "table-wrap" }, el("table", { "aria-label": label },
    el("thead", {}, el("tr", {}, columns.map((c) => {
      const [text, cls] = Array.isArray(c) ? c : [c, ""];
      return el("th", { scope: "col", class: cls || null, text });
    }))), el("tbody", {}, rows)));
}

export function td(text, cls) {
  return el("td", { class: cls || null }, text instanceof Node ? text : String(text ?? ""));
}

// --- Tenants --------------------------------------------------------------------------------

export const isOperator = () => Boolean(state.me && state.me.operator);
export const ALL = "*";
/** The tenant a list read asks for: the picked one, "*" = every tenant (operators), else the
 * key's own. */
export const tenantParam = () => (isOperator() ? sessionStorage.getItem(TENANT) || ALL : undefined);
/** Whether lists show every tenant's rows (each row then names its tenant). */
export const allTenants = () => tenantParam() === ALL;
/** The tenant one record's read asks for: the one its link names (a row of "All tenants"),
 * else the picked one, else the key's own. */
export function objectTenant(query) {
  if (!isOperator()) return undefined;
  return new URLSearchParams(query || "").get("tenant") || sessionStorage.getItem(TENANT) || state.me.tenant;
}
/** A record's link, naming its tenant when lists show every tenant's rows. */
export function recordHref(kind, id, tenant) {
  const href = `#/${kind}/${encodeURIComponent(id)}`;
  return allTenants() && tenant ? `${href}?tenant=${encodeURIComponent(tenant)}` : href;
}
/** The tenant figures are shown for: the picked one, "" = every tenant (operators only). */
export const figuresTenant = () => (isOperator() ? sessionStorage.getItem(TENANT) || "" : undefined);

function tenantPicker() {
  const select = el("select", { id: "tenant-pick", "aria-label": "Tenant" },
    el("option", { value: "", text: "All tenants" }));
  const picked = sessionStorage.getItem(TENANT) || "";
  for (const t of state.tenants || [state.me.tenant]) {
    select.append(el("option", { value: t, text: t, selected: t === picked }));
  }
  if (picked && !(state.tenants || []).includes(picked)) select.append(el("option", { value: picked, text: picked, selected: true }));
  // The scope changes on a selection (a click, or Enter), not on each arrow key that moves
  // through a closed picker (Chromium fires "change" for those): a keyed move applies on
  // Enter or when the picker loses focus.
  let keyed = false;
  const apply = () => {
    keyed = false;
    if (select.value === (sessionStorage.getItem(TENANT) || "")) return;
    if (select.value) sessionStorage.setItem(TENANT, select.value); else sessionStorage.removeItem(TENANT);
    route();
  };
  select.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); apply(); } else if (event.key !== "Tab") keyed = true;
  });
  select.addEventListener("change", () => { if (!keyed) apply(); });
  select.addEventListener("blur", () => { if (keyed) apply(); });
  return el("label", { class: "tenant" }, "Tenant ", select);
}

export function pickTenant(tenant) {
  if (!isOperator()) return;
  if (tenant) sessionStorage.setItem(TENANT, tenant); else sessionStorage.removeItem(TENANT);
  if (tenant && state.tenants && !state.tenants.includes(tenant)) state.tenants.push(tenant);
  renderWho();
}

// --- Page lifecycle -------------------------------------------------------------------------

export function every(milliseconds, fn) {
  const id = setInterval(fn, milliseconds);
  state.timers.add(id);
  return () => { clearInterval(id); state.timers.delete(id); };
}

export function show(...nodes) {
  page.replaceChildren(...nodes);
}

export function ready(name) {
  page.dataset.ready = name;
}

export function failure(err) {
  if (err instanceof ApiError && err.status === 401) { signOut(err.message); return; }
  const note = el("div", { class: "alert", role: "alert" }, el("strong", { text: "Could not load this page: " }), err.message,
    " ", el("button", { type: "button", text: "Try again", onclick: () => route() }));
  for (const loading of page.querySelectorAll(".loading")) loading.remove();
  page.prepend(note);
  ready("error");
}

const ROUTES = [
  [/^#\/overview(?:\?(.*))?$/, "overview", "overviewPage", "overview"],
  [/^#\/requests(?:\?(.*))?$/, "requests", "requestsPage", "requests"],
  [/^#\/response\/([^?]+)(?:\?(.*))?$/, "response", "responsePage", "requests", true],
  [/^#\/traces(?:\?(.*))?$/, "traces", "tracesPage", "traces"],
  [/^#\/trace\/([^?]+)(?:\?(.*))?$/, "traces", "tracePage", "traces", true],
  [/^#\/conversations(?:\?(.*))?$/, "conversations", "conversationsPage", "conversations"],
  [/^#\/conversation\/([^?]+)(?:\?(.*))?$/, "conversations", "conversationPage", "conversations", true],
  [/^#\/budgets$/, "budgets", "budgetsPage", "budgets"],
  [/^#\/usage(?:\?(.*))?$/, "usage", "usagePage", "usage"],
  [/^#\/keys(?:\?(.*))?$/, "keys", "keysPage", "keys", true],
  [/^#\/playground$/, "playground", "playgroundPage", "playground"],
];

function renderWho() {
  who.replaceChildren(...[
    el("span", { class: "me", text: `${state.me.tenant}${isOperator() ? " (operator)" : ""}` }),
    isOperator() ? tenantPicker() : null,
    el("button", { type: "button", text: "Sign out", onclick: () => signOut() }),
  ].filter(Boolean));
}

let routing = null;
let again = false;

/** Render the page the hash names; calls while one renders run once it is done (the latest
 * hash wins), so a slow page never paints over a newer one. */
export async function route() {
  if (routing) { again = true; return routing; }
  routing = (async () => {
    do { again = false; await routeOnce(); } while (again);
  })();
  try { await routing; } finally { routing = null; }
}

async function routeOnce() {
  for (const id of state.timers) clearInterval(id);
  state.timers.clear();
  if (!sessionStorage.getItem(KEY)) { signOut(); return; }
  if (!state.me) {
    try { state.me = await api("/v1/console/me"); } catch (err) { signOut(err.message); return; }
    if (state.me.operator) state.tenants = (await api("/v1/console/tenants").catch(() => ({ data: [] }))).data;
    renderWho();
  }
  signin.hidden = true;
  nav.hidden = false;
  const hash = location.hash || "#/overview";
  const asked = new URLSearchParams(hash.split("?")[1] || "").get("tenant");
  delete page.dataset.ready;
  for (const [pattern, module, name, tab, record] of ROUTES) {
    const match = hash.match(pattern);
    if (!match) continue;
    // A list's link naming a tenant picks it ("*": all); a record's names only whose it is.
    if (asked !== null && isOperator() && !record) pickTenant(asked === ALL ? "" : asked);
    for (const a of nav.querySelectorAll("a")) {
      if (a.dataset.page === tab) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    page.replaceChildren(el("p", { class: "muted loading", text: "Loading…" }));
    try {
      const loaded = await import(`./${module}.js`);
      await loaded[name](match);
    } catch (err) {
      failure(err);
    }
    return;
  }
  location.hash = "#/overview";
}

function signOut(message) {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(TENANT);
  state.me = null;
  state.tenants = null;
  page.replaceChildren();
  nav.hidden = true;
  who.replaceChildren();
  signin.hidden = false;
  document.getElementById("signin-error").textContent = message || "";
}

document.getElementById("signin-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("api-key");
  sessionStorage.setItem(KEY, input.value.trim());
  input.value = "";
  route();
});
nav.addEventListener("click", (event) => {  // the current page's link reloads it
  const link = event.target.closest("a");
  if (link && link.getAttribute("href") === location.hash) { event.preventDefault(); route(); }
});
window.addEventListener("hashchange", route);
route();
