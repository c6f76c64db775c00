// The Conversations pages: the tenant's conversations, newest first, and one conversation's
// items in order (both paged).

import { api, el, show, ready, tenantParam, allTenants, objectTenant, recordHref, utc, facts, emptyState, table, td } from "./console.js";
import { step } from "./items.js";

const metadata = (m) => Object.entries(m || {}).map(([k, v]) => `${k}=${v}`).join(", ");

export async function conversationsPage() {
  const more = el("button", { type: "button", text: "Older", hidden: true });
  const box = el("div");
  const everyTenant = allTenants();
  show(el("h2", { text: "Conversations" }), box, more);
  let cursor;
  let body = null;
  const load = async () => {
    const answer = await api("/v1/console/conversations", { tenant: tenantParam(), limit: "50", before: cursor });
    const rows = answer.data.map((c) => el("tr", { "data-id": c.id, "data-tenant": c.tenant },
      td(el("a", { href: recordHref("conversation", c.id, c.tenant), class: "id", text: c.id }), "clip"),
      everyTenant ? td(c.tenant, "clip tenant") : null,
      td(utc(c.created_at)),
      td(metadata(c.metadata), "wide clip")));
    if (body) body.append(...rows);
    else if (rows.length) {
      box.replaceChildren(table("Conversations, newest first", ["Conversation", ...(everyTenant ? ["Tenant"] : []), "Created (UTC)", ["Metadata", "wide"]], rows));
      body = box.querySelector("tbody");
    } else {
      box.replaceChildren(emptyState("No conversations yet.",
        el("p", { text: "A conversation is created with POST /v1/conversations, and responses created with conversation: <its id> add their turns to it." })));
    }
    cursor = answer.next_cursor;
    more.hidden = !cursor;
  };
  more.addEventListener("click", () => load().catch(() => {}));
  await load();
  ready("conversations");
}

export async function conversationPage(match) {
  const id = decodeURIComponent(match[1]);
  const tenant = objectTenant(match[2]);
  const items = el("ol", { class: "timeline", "aria-label": "Conversation items, oldest first" });
  const head = el("div");
  let after;
  const more = el("button", { type: "button", text: "Later items", hidden: true });
  const load = async () => {
    const answer = await api(`/v1/console/conversations/${encodeURIComponent(id)}/items`,
      { tenant, limit: "100", after });
    if (!head.children.length) {
      const c = answer.conversation;
      head.append(facts([["Tenant", answer.tenant], ["Created (UTC)", utc(c.created_at)], ["Metadata", metadata(c.metadata)]]));
    }
    items.append(...answer.data.map((i) => step(i, i.role || "item")));
    after = answer.last_id || after;
    more.hidden = !answer.has_more;
  };
  more.addEventListener("click", () => load().catch(() => {}));
  show(el("h2", { class: "id-title", text: `Conversation ${id}` }), head, items, more);
  await load();
  ready("conversation");
}
