/*
 * Remora web client: the Administration page (members of remora_admin):
 * statistics, the last hour's charts, the workers and their health, the
 * grants (granted from a form, revoked from their rows) and the limits per
 * role, looked at again every few seconds while the page is shown.  It
 * uses what app.js defines (el, api, S, kv, status, formError, ...); a
 * classic script, loaded after app.js (whose wiring runs once the page is
 * loaded, when this one has run too).
 */
"use strict";
/* admin */
/* a duration in ms, or "—" when there is none (nothing was written yet) */
function ms(v) { return v === null || v === undefined ? "—" : Number(v).toFixed(1) + " ms"; }
const STATE_COLORS = { queued: "#7a4d00", running: "#0b5cad", succeeded: "#17692b", failed: "#a40000", cancelled: "#555" };
/* the last hour, minute by minute (remora_throughput): jobs by state, bytes per second */
async function showCharts() {
  const d = await api("GET", "/api/throughput");
  const at = (r) => new Date(r.minute).getTime() + 60000; /* each row is the minute's end */
  $("charts").replaceChildren(
    lineChart("chart-states", "Jobs by state (queued and running at each minute's end; ended in the minute)",
      Object.keys(STATE_COLORS).map((k) => ({ name: k, color: STATE_COLORS[k], points: d.minutes.map((r) => [at(r), Number(r[k])]) })),
      (v) => String(Math.round(v))),
    lineChart("chart-bytes", "Bytes per second",
      [{ name: "bytes/s", color: "#0b5cad", points: d.minutes.map((r) => [at(r), Number(r.bytes_per_second)]) }],
      (v) => bytes(Math.round(v)) + "/s"));
}

/* a worker is alive while it beats (workers beat every few seconds) */
const STALE_MS = 60000;
function health(w) {
  if (w.stopped_at) return el("span", {}, "stopped");
  const age = Date.now() - new Date(w.heartbeat_at).getTime();
  return el("span", { class: age > STALE_MS ? "stale" : "alive" }, age > STALE_MS ? "stale" : "alive");
}
/* the admin page looks again every 5 s while it is shown; the limits
 * only while no form of theirs is open */
const ADMIN_REFRESH_MS = 5000;
async function showAdmin() {
  show("admin");
  if (S.atimer) { clearTimeout(S.atimer); S.atimer = null; }
  if (!document.querySelector("form.limits-form")) loadLimits().catch((e) => say(e.message));
  const [st, wk, gr] = await Promise.all([api("GET", "/api/stats"), api("GET", "/api/workers"), api("GET", "/api/admin/grants")]);
  if (S.view !== "admin") return;
  S.atimer = setTimeout(() => { S.atimer = null; if (S.view === "admin" && !document.hidden) showAdmin().catch(() => {}); },
    ADMIN_REFRESH_MS);
  const failures = st.failures_by_class || {};
  $("stats").replaceChildren(kv([
    ["Queued", st.queued], ["Running", st.running], ["Retrying", st.retrying],
    ["Succeeded", st.succeeded], ["Failed", st.failed], ["Cancelled", st.cancelled],
    ["Committed", bytes(st.bytes_committed)], ["In flight", bytes(st.bytes_in_flight)],
    ["Throughput", bytes(st.bytes_per_second) + "/s"],
    ["Leases", st.active_leases + " of " + st.max_active_leases],
    ["Failures by class", Object.keys(failures).length ? Object.entries(failures).map(([k, v]) => k + ": " + v).join(", ") : "none"],
    ["Checkpoint writer", st.checkpoints ? st.checkpoints.transactions + " transactions, " + st.checkpoints.checkpoints +
      " checkpoints, mean commit " + ms(st.checkpoints.mean_commit_ms) : null]]));
  showCharts().catch((e) => say(e.message));
  $("workers").replaceChildren(el("div", { class: "table-wrap" }, el("table", {},
    el("thead", {}, el("tr", {}, ["Incarnation", "PID", "Kind", "Health", "Started", "Heartbeat", "Stopped", "Leases"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, wk.workers.map((w) => el("tr", {},
      el("td", { class: "mono" }, w.incarnation), el("td", {}, w.pid), el("td", {}, w.kind),
      el("td", { class: "health" }, health(w)),
      el("td", {}, when(w.started_at)), el("td", {}, ago(w.heartbeat_at)), el("td", {}, when(w.stopped_at)),
      el("td", {}, w.active_leases)))))));
  const grants = [...gr.targets.map((g) => Object.assign({ kind: "target" }, g)),
    ...gr.sources.map((g) => Object.assign({ kind: "source" }, g))];
  $("grants").replaceChildren(grants.length ? el("div", { class: "table-wrap" }, el("table", { id: "grants-table" },
    el("caption", { class: "sr-only" }, "Source and target grants"),
    el("thead", {}, el("tr", {}, ["Kind", "Role", "Bucket", "Prefix", "Endpoint", "Granted by", "Granted", "Revoke"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, grants.map((g) => el("tr", {},
      el("td", {}, g.kind), el("td", {}, g.role), el("td", { class: "mono" }, g.bucket),
      el("td", { class: "mono" }, g.prefix_pattern), el("td", {}, g.endpoint || ""),
      el("td", {}, g.granted_by), el("td", {}, when(g.granted_at)),
      el("td", {}, el("button", { type: "button", class: "secondary revoke",
        "aria-label": "Revoke " + g.kind + " " + g.bucket + "/" + g.prefix_pattern + " of " + g.role,
        onclick: () => revokeGrant(g) }, "Revoke"))))))) : el("p", {}, "No grants."));
  /* the roles an administrator may mean, offered to the limits' role field */
  const roles = new Set([...grants.map((g) => g.role), ...LIMITS.keys()]);
  $("roles-list").replaceChildren(...[...roles].sort().map((r) => el("option", { value: r })));
}

/* grants (admins): remora.grant_* from the form, remora.revoke_* per row */
async function grantFrom(ev) {
  ev.preventDefault();
  const form = ev.target;
  formError(form, null);
  const body = {};
  for (const c of form.querySelectorAll("[name]")) if (c.value.trim()) body[c.name] = c.value.trim();
  try {
    await api("POST", "/api/admin/grants", body);
    status("grants-status", "Granted " + body.kind + " " + body.bucket + "/" + (body.prefix || "*") + " to " + body.role + ".");
    form.reset();
    await showAdmin();
  } catch (e) { formError(form, e); }
}
async function revokeGrant(g) {
  if (!confirm("Revoke " + g.role + "'s " + g.kind + " grant of " + g.bucket + "/" + g.prefix_pattern + "?")) return;
  const p = new URLSearchParams({ kind: g.kind, role: g.role, bucket: g.bucket, prefix: g.prefix_pattern });
  if (g.endpoint) p.set("endpoint", g.endpoint);
  try {
    await api("DELETE", "/api/admin/grants?" + p.toString());
    status("grants-status", "Revoked " + g.role + "'s " + g.kind + " grant of " + g.bucket + "/" + g.prefix_pattern + ".");
    await showAdmin();
  } catch (e) { status("grants-status", e.message); }
}

/* limits per role (admins): the rows of remora_role_limits; a form per row
 * sets some of them (remora.set_role_limits: an empty field leaves that
 * limit as it is), Reset returns them all to the defaults */
const LIMIT_FIELDS = [["weight", "Weight"], ["max_running", "Max running"], ["max_queued", "Max queued"],
  ["max_bytes_per_second", "Max bytes/s"]];
const LIMITS = new Map(); /* the rows shown, by role */
function limitText(k, v) {
  if (k === "weight") return v;
  if (!Number(v)) return "none";
  return k === "max_bytes_per_second" ? bytes(v) + "/s" : v;
}
async function loadLimits() {
  const d = await api("GET", "/api/admin/role-limits");
  LIMITS.clear();
  for (const r of d.role_limits) LIMITS.set(r.role, r);
  $("limits-table").tBodies[0].replaceChildren(...d.role_limits.map(limitRow));
  $("limits-empty").hidden = d.role_limits.length > 0;
}
function limitRow(r) {
  return el("tr", { "data-role": r.role },
    el("td", { class: "mono" }, r.role), LIMIT_FIELDS.map(([k]) => el("td", { class: k }, limitText(k, r[k]))),
    el("td", { class: "running" }, r.running), el("td", { class: "queued" }, r.queued),
    el("td", {}, bytes(r.bytes_per_second) + "/s"),
    el("td", {}, el("div", { class: "actions" },
      el("button", { type: "button", class: "secondary", "aria-label": "Edit the limits of " + r.role,
        onclick: (e) => editLimits(r, e.target.closest("tr")) }, "Edit"),
      el("button", { type: "button", class: "secondary", "aria-label": "Reset the limits of " + r.role,
        onclick: () => resetLimits(r.role) }, "Reset"))));
}
/* the editor of a role's limits, in a row of its own below the role's row
 * (after: null puts it first, for a role not in the table yet) */
let limitForms = 0;
function editLimits(r, after) {
  const open = document.querySelector('form.limits-form[data-role="' + CSS.escape(r.role) + '"]');
  if (open) { open.closest("tr").remove(); return; }
  const id = "lim" + (++limitForms) + "-";
  const form = el("form", { class: "limits-form", "data-role": r.role, "aria-label": "Limits of " + r.role,
    onsubmit: (ev) => saveLimits(ev, r.role) },
    el("p", { class: "hint" }, "Limits of ", el("strong", {}, r.role), ": 0 is no limit; an empty field stays as it is."),
    el("div", { class: "grid" }, LIMIT_FIELDS.map(([k, label]) => el("div", {},
      el("label", { for: id + k }, label),
      el("input", { id: id + k, name: k, type: "number", step: 1, min: k === "weight" ? 1 : 0,
        max: k === "weight" ? 1000 : null, placeholder: r[k], "aria-describedby": id + k + "-err" }),
      el("p", { id: id + k + "-err", class: "error field-error" })))),
    el("p", { class: "error", role: "alert" }),
    el("div", { class: "actions" }, el("button", { type: "submit" }, "Save"),
      el("button", { type: "button", class: "secondary", onclick: (e) => e.target.closest("tr").remove() }, "Cancel")));
  const tr = el("tr", { class: "limits-edit" }, el("td", { colspan: 9 }, form));
  if (after) after.after(tr); else $("limits-table").tBodies[0].prepend(tr);
  form.querySelector("input").focus();
}
async function saveLimits(ev, role) {
  ev.preventDefault();
  const form = ev.target;
  formError(form, null);
  const body = {};
  for (const input of form.querySelectorAll("input[name]"))
    if (input.value.trim()) body[input.name] = Number(input.value);
  try {
    await api("PUT", "/api/admin/role-limits/" + encodeURIComponent(role), body);
    say("Limits of " + role + " saved.");
    await loadLimits();
  } catch (e) { formError(form, e); }
}
async function resetLimits(role) {
  try {
    await api("DELETE", "/api/admin/role-limits/" + encodeURIComponent(role));
    say("Limits of " + role + " reset to the defaults.");
    await loadLimits();
  } catch (e) { say(e.message + (e.data && e.data.hint ? " " + e.data.hint : "")); }
}
function addLimits(ev) {
  ev.preventDefault();
  const role = $("l-role").value.trim();
  if (!role) return;
  const open = document.querySelector('form.limits-form[data-role="' + CSS.escape(role) + '"]');
  if (open) { open.querySelector("input").focus(); return; }
  const tr = document.querySelector('#limits-table tr[data-role="' + CSS.escape(role) + '"]');
  editLimits(tr ? LIMITS.get(role) : { role }, tr);
  $("l-role").value = "";
}
