/*
 * Remora web client: one page, no build step, no external assets.
 *
 * Every request goes to the JSON API of the same server ("The HTTP API" in
 * doc/user-guide.md) with the session cookie; every change carries the
 * session's CSRF token.
 * Text from the server (sources, labels, error messages) is only ever put
 * into the page as text (textContent), never as markup.  Live progress
 * comes from Server-Sent Events (/api/events); when the stream fails, the
 * page polls instead.
 *
 * This file: the shared helpers, sign-in, the views and lists, jobs (list,
 * page, bulk actions, submit), live updates and the wiring; exports.js the
 * exports, admin.js the Administration page, charts.js the charts.
 */
"use strict";

const S = { user: null, csrf: null, admin: false, events: null, poll: null, view: null, jobId: null,
  exportId: null, xtimer: null };

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of kids.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/* say(msg, carry): the page's status line, about the view shown (carry:
 * the view the action goes to); cleared once another view is shown */
function say(msg, carry) { $("live").textContent = msg; S.liveFor = carry ? "next" : S.view; }
/* status(id, msg): the line next to the action that it is about */
function status(id, msg) { const e = $(id); if (e) e.textContent = msg || ""; else say(msg); }
/* an error of the job tables as a person reads it: class, message, HTTP status */
function errorText(e) {
  if (!e) return "";
  return (e.class ? e.class + ": " : "") + (e.message || JSON.stringify(e)) +
    (e.http_status ? " (HTTP " + e.http_status + ")" : "");
}
/* copy text, saying so on the line next to the button (with the link
 * itself, for a link) */
async function copy(text, what, line, link) {
  try { await navigator.clipboard.writeText(text); }
  catch (_) {
    /* no clipboard API here (not a secure context): a selected field */
    const t = el("textarea", { class: "sr-only", readonly: true });
    t.value = text; document.body.append(t); t.select();
    document.execCommand("copy"); t.remove();
  }
  status(line, "Copied " + what + ".");
  if (link && $(line)) $(line).append(" ", el("a", { href: text, class: "download-link", rel: "noreferrer" }, "the link"));
}
function copyButton(text, what, line, label) {
  return el("button", { type: "button", class: "secondary copy", "data-copy": text,
    "aria-label": "Copy " + what, onclick: () => copy(text, what, line) }, label || "Copy");
}
/* a new key each time a form is shown: a double submit is one request */
function newKey() { return crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random(); }

class ApiError extends Error {
  constructor(status, data) {
    super((data && data.error) || "HTTP " + status);
    this.status = status; this.data = data || {};
  }
}

async function api(method, path, body, headers) {
  const opts = { method, headers: Object.assign({}, headers), credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  if (method !== "GET" && S.csrf) opts.headers["X-CSRF-Token"] = S.csrf;
  const r = await fetch(path, opts);
  let data = null;
  if (r.status !== 204 && r.status !== 304) data = await r.json().catch(() => null);
  if (r.status === 401 && path !== "/api/session") { signedOut(); throw new ApiError(401, data); }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

/* ---- forms ---- */
/* formError(form, e, text): every form shows what went wrong the same
 * way.  Without e, it clears the form's messages.  An API error naming a
 * field the form has, with a message line of its own, goes there (the
 * field marked invalid and focused); anything else goes to the form's
 * alert line.  The text is the error's message with the server's detail
 * and hint, unless the caller says otherwise. */
function formError(form, e, text) {
  for (const p of form.querySelectorAll(".field-error")) p.textContent = "";
  for (const i of form.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
  const alert = form.querySelector('[role="alert"]');
  alert.textContent = "";
  if (!e) return;
  const msg = text || e.message + (e.data && e.data.detail ? " — " + e.data.detail : "") +
    (e.data && e.data.hint ? " " + e.data.hint : "");
  const f = e.data && e.data.field;
  const input = f && form.querySelector('[name="' + CSS.escape(f) + '"]');
  const line = input && input.hasAttribute("aria-describedby") && $(input.getAttribute("aria-describedby"));
  if (line) {
    input.setAttribute("aria-invalid", "true");
    line.textContent = msg;
    input.focus();
  } else alert.textContent = msg;
}

/* ---- formatting ---- */
function bytes(n) {
  if (n === null || n === undefined) return "";
  const u = ["B", "kB", "MB", "GB", "TB"];
  let i = 0, v = Number(n);
  while (v >= 1000 && i < u.length - 1) { v /= 1000; i++; }
  return (i ? v.toFixed(1) : v) + " " + u[i];
}
function when(t) { return t ? new Date(t).toLocaleString() : ""; }
/* a duration as a person says it */
function duration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 90) return s + " s";
  if (s < 5400) return Math.round(s / 60) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return Math.round(s / 86400) + " days";
}
/* how long ago, beside the time itself */
function ago(t) { return t ? duration(Date.now() - new Date(t).getTime()) + " ago" : ""; }
function took(j) { return duration(new Date(j.finished_at) - new Date(j.started_at || j.submitted_at)); }
function eta(j) {
  if (!j.bytes_per_second || !j.bytes_total) return "";
  const s = Math.max(0, (j.bytes_total - j.bytes_done) / j.bytes_per_second);
  return s < 90 ? Math.round(s) + " s" : Math.round(s / 60) + " min";
}
function stateBadge(st) { return el("span", { class: "state state-" + st }, st); }
function progressCell(j) {
  const done = j.bytes_done || 0, total = j.bytes_total;
  const kids = [];
  if (total) {
    kids.push(el("progress", { max: total, value: Math.min(done, total),
      "aria-label": "job " + j.job_id + " progress" }));
    kids.push(" " + Math.floor(100 * done / total) + "%");
  } else if (done) kids.push(bytes(done));
  if (j.state === "running" && j.bytes_per_second)
    kids.push(el("span", { class: "rate" }, bytes(j.bytes_per_second) + "/s, ETA " + eta(j)));
  if (j.restarted_from_zero) kids.push(el("span", { class: "rate" }, "restarted from zero"));
  return kids;
}

/* ---- views ---- */
const TITLES = { signin: "Sign in", jobs: "Jobs", job: "Job", submit: "Submit a job", admin: "Administration",
  exports: "Exports", export: "Export" };
const NAV_OF = { jobs: "#/jobs", job: "#/jobs", submit: "#/submit", exports: "#/exports", export: "#/exports", admin: "#/admin" };
function show(view) {
  const moved = S.view !== view;
  for (const v of ["signin", "jobs", "job", "submit", "admin", "exports", "export"])
    $(v + "-view").hidden = v !== view;
  document.title = TITLES[view] + " — Remora";
  for (const a of document.querySelectorAll("#nav a"))
    if (a.getAttribute("href") === NAV_OF[view]) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  /* a new view: focus its heading, as a page load would put the reader at the top */
  if (moved && view !== "signin") {
    const h = $(view + "-view").querySelector("h1");
    if (h) { h.setAttribute("tabindex", "-1"); h.focus({ preventScroll: true }); }
  }
  if (S.liveFor === "next") S.liveFor = view;
  else if (S.liveFor !== view) $("live").textContent = "";
  S.view = view;
  if (view !== "export" && S.xtimer) { clearTimeout(S.xtimer); S.xtimer = null; }
  if (view !== "admin" && S.atimer) { clearTimeout(S.atimer); S.atimer = null; }
}

function signedIn(info) {
  S.user = info.user; S.csrf = info.csrf || S.csrf; S.admin = !!info.admin;
  /* what an empty Bucket or Prefix means */
  if (info.default_bucket) $("s-bucket").placeholder = info.default_bucket + " (the default)";
  if (info.default_prefix) $("s-prefix").placeholder = info.default_prefix + " (the default)";
  $("nav").hidden = false; $("signout").hidden = false;
  $("who").hidden = false; $("who").textContent = "Signed in as " + S.user;
  $("nav-admin").hidden = !S.admin;
  startEvents();
}

function signedOut() {
  S.user = null; S.csrf = null;
  $("nav").hidden = true; $("signout").hidden = true; $("who").hidden = true;
  stopEvents();
  show("signin");
  $("si-user").focus();
}

async function route() {
  if (!S.user) return signedOut();
  const h = location.hash || "#/jobs";
  let m;
  if ((m = h.match(/^#\/jobs\/(\d+)$/))) return showJob(m[1]);
  if ((m = h.match(/^#\/exports\/(\d+)$/))) return showExport(m[1]);
  if (h === "#/exports") return showExports();
  if (h === "#/submit") { showSubmit(); return; }
  if ((m = h.match(/^#\/jobs\?(.*)$/))) return listFilter(JOBS, jobsFilterFrom(new URLSearchParams(m[1])));
  if (h === "#/admin" && S.admin) return showAdmin();
  return showJobs();
}

/* ---- lists ----
 * The jobs and the exports list have one shape and the same functions:
 *   filter  what the list's filter form asked for
 *   rows    the rows shown, by id (live events update them in place)
 *   pages   the cursors of the pages before the one shown (none: the first)
 *   next    the next page's cursor, from the latest answer
 *   seq     the number of the latest load: an earlier answer is dropped
 * and what differs between the two lists is said once, in its definition:
 * the view, the API path and its query, the row, the elements. */
function newList(def) { return Object.assign({ rows: new Map(), pages: [], next: null, seq: 0 }, def); }

async function loadList(L) {
  show(L.view);
  const p = L.query(L.filter);
  if (L.pages.length) p.set("after", L.pages[L.pages.length - 1]);
  const seq = ++L.seq;
  const data = await api("GET", L.path + "?" + p.toString());
  if (seq !== L.seq) return; /* a later load is under way */
  const items = data[L.items];
  L.next = data.next;
  L.rows = new Map(items.map((r) => [String(r[L.id]), r]));
  $(L.table).tBodies[0].replaceChildren(...items.map(L.row));
  /* no rows at all (a first page, no filter): say how to begin */
  const none = !items.length && !L.pages.length && L.isUnfiltered && L.isUnfiltered(L.filter);
  $(L.empty).hidden = items.length > 0 || none;
  if (L.none) $(L.none).hidden = !none;
  $(L.nextButton).disabled = !L.next;
  $(L.firstButton).disabled = L.pages.length === 0;
  if (L.loaded) L.loaded();
}
function listFilter(L, filter) { L.filter = filter; L.pages = []; return loadList(L); }
function listFirst(L) { L.pages = []; return loadList(L); }
function listNext(L) {
  if (!L.next) return Promise.resolve();
  L.pages.push(L.next);
  return loadList(L);
}
/* listWire(L, form, read): the list's filter form and page buttons */
function listWire(L, form, read) {
  $(form).addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = read();
    /* a list whose filter lives in the URL: the route loads it */
    const h = L.hash ? L.hash(f) : null;
    if (h && location.hash !== h) { location.hash = h; return; }
    listFilter(L, f).catch((e) => say(e.message));
  });
  $(L.nextButton).addEventListener("click", () => listNext(L).catch((e) => say(e.message)));
  $(L.firstButton).addEventListener("click", () => listFirst(L).catch((e) => say(e.message)));
}

/* jobs list */
const JOBS = newList({
  view: "jobs", path: "/api/jobs", items: "jobs", id: "job_id", row: jobRow,
  table: "jobs-table", empty: "jobs-empty", none: "jobs-none", nextButton: "page-next", firstButton: "page-first",
  isUnfiltered: (f) => !f.state && !f.q && !f.owner,
  filter: { state: "", q: "", owner: "", limit: "50", sort: "submitted:desc" },
  query(f) {
    const p = new URLSearchParams();
    if (f.state) p.set("state", f.state);
    if (f.q) p.set("q", f.q);
    if (f.owner) p.set("owner", f.owner);
    p.set("limit", f.limit);
    const [sort, dir] = (f.sort || "submitted:desc").split(":");
    if (sort !== "submitted" || dir !== "desc") { p.set("sort", sort); p.set("dir", dir); }
    return p;
  },
  loaded() { $("select-all").checked = false; },
  /* #/jobs?state=…&q=…&owner=…&sort=…&limit=…: a filter one can bookmark */
  hash(f) {
    const p = new URLSearchParams();
    for (const k of ["state", "q", "owner", "sort", "limit"])
      if (f[k] && f[k] !== JOBS_DEFAULT[k]) p.set(k, f[k]);
    const q = p.toString();
    return q ? "#/jobs?" + q : "#/jobs";
  }
});
const JOBS_DEFAULT = { state: "", q: "", owner: "", limit: "50", sort: "submitted:desc" };
/* the filter a URL asks for, shown in the filter form too */
function jobsFilterFrom(p) {
  const f = Object.assign({}, JOBS_DEFAULT);
  for (const k of Object.keys(f)) if (p.get(k)) f[k] = p.get(k);
  $("f-state").value = f.state; $("f-q").value = f.q; $("f-owner").value = f.owner;
  $("f-sort").value = f.sort; $("f-limit").value = f.limit;
  return f;
}
function showJobs() {
  /* #/jobs alone: the default filter */
  if (location.hash !== "#/jobs?" && !location.hash.startsWith("#/jobs?")) JOBS.filter = jobsFilterFrom(new URLSearchParams());
  return loadList(JOBS);
}

function jobRow(j) {
  return el("tr", { "data-job": j.job_id },
    el("td", {}, el("input", { type: "checkbox", class: "sel", value: j.job_id, "aria-label": "select job " + j.job_id })),
    el("td", {}, el("a", { href: "#/jobs/" + j.job_id }, "#" + j.job_id)),
    el("td", { class: "st" }, stateBadge(j.state),
      j.state === "failed" && j.last_error ? el("span", { class: "rate err-line" }, errorText(j.last_error)) : null),
    el("td", { class: "owner" }, j.owner),
    el("td", { class: "src mono" }, j.source),
    el("td", {}, j.label || ""),
    el("td", { class: "prio" }, j.priority),
    el("td", { class: "prog" }, progressCell(j)),
    el("td", {}, when(j.submitted_at), j.finished_at ? el("span", { class: "rate" }, "took " + took(j)) : null));
}

function updateRow(ev) {
  const tr = document.querySelector('tr[data-job="' + ev.job_id + '"]');
  if (!tr) return false;
  const j = Object.assign(JOBS.rows.get(String(ev.job_id)) || {}, ev);
  JOBS.rows.set(String(ev.job_id), j);
  tr.querySelector(".st").replaceChildren(stateBadge(j.state),
    j.state === "failed" && j.last_error ? el("span", { class: "rate err-line" }, errorText(j.last_error)) : "");
  tr.querySelector(".prog").replaceChildren(...progressCell(j));
  return true;
}

/* one job */
function kv(pairs) {
  return el("dl", { class: "kv" }, pairs.filter((p) => p[1] !== null && p[1] !== undefined && p[1] !== "")
    .map(([k, v]) => [el("dt", {}, k), el("dd", {}, v instanceof Node ? v : String(v))]));
}

async function showJob(id) {
  show("job");
  if (S.jobId !== id) {
    /* nothing of the previous job stays on the page while this one loads */
    S.jobId = id; S.shown = null;
    $("job-h").textContent = "Job #" + id;
    $("job-body").replaceChildren(el("p", {}, "Loading…"));
  }
  let j;
  try { j = await api("GET", "/api/jobs/" + id); }
  catch (e) {
    $("job-h").textContent = "Job #" + id;
    $("job-body").replaceChildren(el("p", { class: "error", role: "alert" }, e.message));
    return;
  }
  renderJob(j);
}

/* why a queued job has not started: its owner's limit, a retry's delay,
 * or its turn among everyone's jobs */
function waitingText(j) {
  if (j.state !== "queued" && j.state !== "retrying") return "";
  const l = j.owner_limits;
  if (l && l.max_running > 0 && l.running >= l.max_running)
    return (j.owner === S.user ? "You run " : j.owner + " runs ") + l.running + " job(s), the most " +
      (j.owner === S.user ? "your" : "the") + " role may run at once (max running " + l.max_running +
      "): this one starts when one of them ends.";
  if (j.next_attempt_at && new Date(j.next_attempt_at) > new Date())
    return "The next attempt is due at " + when(j.next_attempt_at) + ".";
  return "For a worker: jobs start as workers free up, shared between the users who wait.";
}
/* what the last action on this job came to, while it still holds */
function jobStatusText(j) {
  const st = S.jobStatus;
  if (!st || st.job !== Number(j.job_id)) return "";
  if (st.whileState && j.state !== st.whileState) return "Job " + j.state + ".";
  return st.text;
}
/* "2 of 5", and for an ended job what the rest of its budget came to */
function attemptsText(j) {
  const t = j.attempts_used + " of " + j.max_attempts;
  if (j.state === "failed" && j.attempts_used < j.max_attempts) return t + " (not retried: the error is not one that passes)";
  if (j.state === "succeeded" || j.state === "cancelled" || j.state === "failed") return j.attempts_used + " used";
  return t;
}

function renderJob(j) {
  noteSample(j);
  $("job-h").textContent = "Job #" + j.job_id + (j.dry_run ? " (dry run)" : "") + (j.label ? " — " + j.label : "");
  const finished = ["succeeded", "failed", "cancelled"].includes(j.state);
  const retriable = j.state === "failed" || j.state === "cancelled";
  const resultDir = j.result_manifest_key ? j.result_manifest_key.replace(/[^/]*$/, "") : null;
  const actions = el("div", { class: "actions" },
    retriable ? el("button", { type: "button", id: "act-retry", onclick: () => act("retry", j.job_id) }, "Retry") : null,
    el("button", { type: "button", id: "act-cancel", disabled: finished || j.cancel_requested,
      onclick: () => act("cancel", j.job_id) }, j.cancel_requested && !finished ? "Cancelling…" : "Cancel"),
    el("button", { type: "button", class: "secondary", id: "act-delete",
      onclick: () => act("delete", j.job_id) }, "Delete"),
    el("button", { type: "button", class: "danger", id: "act-hard-delete",
      onclick: () => act("hard", j.job_id) }, "Delete with its objects"),
    el("span", { id: "job-status", class: "status", role: "status" }, jobStatusText(j)));
  const summary = kv([
    ["State", stateBadge(j.state)], ["Source", j.source], ["Kind", j.source_kind],
    ["Owner", j.owner],
    ["Result", resultDir ? el("span", {}, el("span", { class: "mono", id: "result-uri" }, "s3://" + j.bucket + "/" + resultDir),
      " ", copyButton("s3://" + j.bucket + "/" + resultDir, "the result's S3 URI", "job-status", "Copy S3 URI")) : null],
    ["Writes to", resultDir ? null : "s3://" + (j.bucket || "") + "/" + (j.prefix ? j.prefix + "/" : "") + j.job_id + "/<attempt>/"],
    ["Waiting", waitingText(j) ? el("span", { id: "job-waiting" }, waitingText(j)) : null],
    ["Progress", el("span", { id: "job-progress" }, progressCell(j))],
    ["Members", j.members_total !== null && j.members_total !== undefined ? (j.members_done || 0) + " / " + j.members_total : null],
    ["Reused", j.bytes_reused ? bytes(j.bytes_reused) + " copied from an earlier result, " +
      bytes(Math.max(0, (j.result_bytes || j.bytes_done || 0) - j.bytes_reused)) + " downloaded" : null],
    ["Attempts", attemptsText(j)], ["Priority", j.priority],
    ["Submitted", when(j.submitted_at) + " (" + ago(j.submitted_at) + ")"], ["Started", when(j.started_at)],
    ["Finished", j.finished_at ? when(j.finished_at) + " (took " + took(j) + ")" : null],
    ["Size", j.result_bytes !== null && j.result_bytes !== undefined ? bytes(j.result_bytes) : null],
    ["Next attempt", when(j.next_attempt_at)], ["Restart reason", j.restart_reason],
    ["Last error", j.last_error ? el("span", { id: "last-error" }, errorText(j.last_error)) : null],
    ["Manifest", j.result_manifest_key], ["Manifest SHA-256", j.result_manifest_sha256],
    ["Idempotency key", j.idempotency_key]]);
  const attempts = el("table", {},
    el("caption", { class: "sr-only" }, "Attempts"),
    el("thead", {}, el("tr", {}, ["#", "Attempt", "Worker", "Token", "Started", "Finished", "State", "Error", "Resume"]
      .map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, (j.attempts || []).map((a) => el("tr", {},
      el("td", {}, a.attempt_no), el("td", { class: "mono" }, a.attempt_id),
      el("td", { class: "mono" }, a.incarnation || ""), el("td", {}, a.fencing_token),
      el("td", {}, when(a.started_at)), el("td", {}, when(a.finished_at)), el("td", {}, a.state),
      el("td", {}, errorText(a.error)),
      el("td", {}, a.resumed_from ? "resumed from " + a.resumed_from : (a.restart_reason ? "from zero: " + a.restart_reason : (a.attempt_no > 1 ? "from zero" : "")))))));
  const ledger = el("table", {},
    el("caption", { class: "sr-only" }, "Recovery ledger"),
    el("thead", {}, el("tr", {}, ["#", "Definition hash", "Request hash", "Access digest", "Provenance"]
      .map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, (j.attempts || []).map((a) => el("tr", {},
      el("td", {}, a.attempt_no), el("td", { class: "mono" }, a.definition_hash || ""),
      el("td", { class: "mono" }, a.request_hash || ""), el("td", { class: "mono" }, a.access_digest || ""),
      el("td", { class: "mono" }, a.provenance ? JSON.stringify(a.provenance) : "")))));
  const members = el("div", { id: "members" }, j.state === "succeeded" ? "Loading result…" : "No committed result.");
  const exporting = j.state === "succeeded"
    ? [el("h2", {}, "Export"), exportForm(j), el("div", { id: "job-exports" })] : [];
  $("job-body").replaceChildren(actions, summary,
    el("h2", {}, "Transfer rate"), jobChart(j),
    el("h2", {}, "Attempts"), el("div", { class: "table-wrap" }, attempts),
    el("h2", {}, "Result"), members, ...exporting,
    el("h2", {}, "Recovery ledger"), el("div", { class: "table-wrap" }, ledger));
  S.shown = j;
  if (j.state === "succeeded") {
    loadMembers(j.job_id);
    loadJobExports(j.job_id).catch(() => {});
  }
}

/* The job's bytes per second: no history of progress is kept, so each
 * attempt is drawn at its mean over its life (the committed result's bytes,
 * or the running attempt's so far, over its time), and the live rates the
 * page sees while it is open are added to it (S.samples). */
function noteSample(j) {
  if (j.state !== "running" || typeof j.bytes_per_second !== "number") return;
  if (!S.samples || S.samples.job !== j.job_id) S.samples = { job: j.job_id, points: [] };
  S.samples.points.push([Date.now(), j.bytes_per_second]);
  if (S.samples.points.length > 600) S.samples.points.shift();
}
function jobChart(j) {
  const mean = [];
  for (const a of j.attempts || []) {
    if (!a.started_at) continue;
    const live = j.progress && j.progress.attempt_id === a.attempt_id;
    const end = a.finished_at ? new Date(a.finished_at).getTime() : Date.now();
    const b = live ? j.progress.bytes_done : (a.state === "succeeded" ? j.result_bytes : null);
    const secs = Math.max((end - new Date(a.started_at).getTime()) / 1000, 0.001);
    if (b === null || b === undefined) continue;
    mean.push([new Date(a.started_at).getTime(), b / secs], [end, b / secs]);
  }
  const live = S.samples && String(S.samples.job) === String(j.job_id) ? S.samples.points : [];
  return lineChart("job-chart", "Bytes per second of job #" + j.job_id,
    [{ name: "mean over the attempt", color: "#17692b", points: mean },
      { name: "live, while this page is open", color: "#0b5cad", points: live }],
    (v) => bytes(Math.round(v)) + "/s");
}

/* the result: where each member is (its S3 URI), its SHA-256, both to
 * copy, and a one-click download (or a presigned link to copy) */
async function loadMembers(id) {
  const data = await api("GET", "/api/jobs/" + id + "/result");
  const t = el("table", { id: "members-table" },
    el("caption", { class: "sr-only" }, "Result members"),
    el("thead", {}, el("tr", {}, ["Path", "Size", "S3 URI", "SHA-256", "How", "Download"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, data.members.map((m) => {
      /* a dry run's member is a plan: no object, so no hash and no download */
      const plan = m.key === null;
      const uri = plan ? null : "s3://" + m.bucket + "/" + m.key;
      return el("tr", {},
        el("td", { class: "mono" }, m.path), el("td", {}, bytes(m.size)),
        el("td", { class: "uri" }, plan ? "—" : [el("span", { class: "mono" }, uri), " ",
          copyButton(uri, "the S3 URI of " + m.path, "members-status", "Copy")]),
        el("td", { class: "sha" }, plan ? "—" : [el("span", { class: "mono" }, m.sha256), " ",
          copyButton(m.sha256, "the SHA-256 of " + m.path, "members-status", "Copy")]),
        el("td", { class: "action" }, m.action === "reuse"
          ? el("a", { href: "#/jobs/" + m.reused_from_job }, (plan ? "would copy from #" : "copied from #") + m.reused_from_job)
          : (plan ? "would download" : "downloaded")),
        el("td", {}, plan ? "" : el("div", { class: "actions" },
          el("button", { type: "button", class: "download", "data-path": m.path,
            onclick: () => download(id, m.path, false) }, "Download"),
          el("button", { type: "button", class: "secondary copy-link", "data-path": m.path,
            onclick: () => download(id, m.path, true) }, "Copy link"))));
    })));
  $("members").replaceChildren(el("p", { id: "members-status", class: "status", role: "status" }),
    el("div", { class: "table-wrap" }, t));
}

/* a presigned URL (15 minutes): opened at once, or copied */
async function download(id, path, copyOnly) {
  try {
    const r = await api("GET", "/api/jobs/" + id + "/result/url?path=" + encodeURIComponent(path));
    if (copyOnly) return copy(r.url, "a download link for " + path + " (valid for 15 minutes)", "members-status", true);
    status("members-status", "Downloading " + path + "…");
    /* another origin's URL: a tab of its own, so that this page stays */
    const a = el("a", { href: r.url, target: "_blank", rel: "noopener noreferrer", download: path.replace(/.*\//, "") });
    document.body.append(a); a.click(); a.remove();
  } catch (e) { status("members-status", e.message); }
}

/* the job page's actions; what came of one is said next to the buttons
 * (S.jobStatus, kept while the page is redrawn, until the state moves on) */
async function act(what, id) {
  const note = (text, whileState) => { S.jobStatus = { job: Number(id), text, whileState }; status("job-status", text); };
  try {
    if (what === "cancel") {
      const r = await api("POST", "/api/jobs/" + id + "/cancel");
      if (r.state === "running") note("Cancel requested: the attempt stops within a second.", "running");
      else if (r.state === "cancelled") note("Cancelled.");
      else note("The job had already ended: " + r.state + ".");
    } else if (what === "retry") {
      const r = await api("POST", "/api/jobs/" + id + "/retry");
      S.jobStatus = { job: r.job_id, text: "A retry of job #" + id + "." };
      location.hash = "#/jobs/" + r.job_id;
      return;
    } else {
      const hard = what === "hard";
      if (!confirm(hard ? "Delete job " + id + " and the objects it wrote?" : "Delete job " + id + "?")) return;
      await api("DELETE", "/api/jobs/" + id + "?hard=" + hard);
      say("Job " + id + " deleted.", true);
      location.hash = "#/jobs";
      return;
    }
  } catch (e) { note(e.message + (e.data && e.data.detail ? " — " + e.data.detail : "")); }
  if (S.view === "job") showJob(id);
}

/* bulk actions */
function selected() { return [...document.querySelectorAll("#jobs-table .sel:checked")].map((c) => c.value); }
async function bulk(what, ids, confirmed) {
  if (!ids.length) { $("bulk-status").textContent = "Nothing selected."; return; }
  if (what === "delete" && !confirmed && !confirm("Delete " + ids.length + " job(s)?")) return;
  /* what became of each: cancelled, to stop, already ended, deleted, refused */
  const n = {};
  const count = (k) => { n[k] = (n[k] || 0) + 1; };
  for (const id of ids) {
    try {
      if (what === "cancel") {
        const r = await api("POST", "/api/jobs/" + id + "/cancel");
        count(r.state === "cancelled" ? "cancelled" : r.state === "running" ? "stopping" : "already " + r.state);
      } else { await api("DELETE", "/api/jobs/" + id + "?hard=false"); count("deleted"); }
    } catch (e) { count("refused"); }
  }
  $("bulk-status").textContent = Object.entries(n).map(([k, v]) => v + " " + k).join(", ") + ".";
  showJobs();
}
/* every job the filter matches (cancel: only the active ones), all pages */
async function matching(activeOnly) {
  const ids = [];
  let after = null;
  do {
    const p = new URLSearchParams();
    const st = activeOnly ? "queued,running,retrying" : JOBS.filter.state;
    if (st) p.set("state", st);
    if (JOBS.filter.q) p.set("q", JOBS.filter.q);
    if (JOBS.filter.owner) p.set("owner", JOBS.filter.owner);
    p.set("limit", "1000");
    if (after) p.set("after", after);
    const d = await api("GET", "/api/jobs?" + p.toString());
    for (const j of d.jobs)
      if (!JOBS.filter.state || JOBS.filter.state.split(",").includes(j.state)) ids.push([String(j.job_id), j.owner]);
    after = d.next;
  } while (after);
  return ids;
}
/* every matching job; the question says whose they are (an admin's
 * filter may cover every user's jobs) */
async function allMatching(what) {
  const rows = await matching(what === "cancel");
  if (!rows.length) { $("bulk-status").textContent = "No job matches."; return; }
  const owners = {};
  for (const [, o] of rows) owners[o] = (owners[o] || 0) + 1;
  const whose = Object.entries(owners).sort((a, b) => b[1] - a[1]).map(([o, c]) => c + " of " + o).join(", ");
  if (!confirm((what === "cancel" ? "Cancel " : "Delete ") + rows.length + " job(s) that match the filter: " + whose + "?")) return;
  await bulk(what, rows.map((r) => r[0]), true);
}

/* submit: the form carries a key of its own (S.submitKey, new each time
 * it is shown), so a double click or a retried request is one job */
function showSubmit() {
  show("submit");
  if (!S.submitKey) S.submitKey = newKey();
}
async function submitJob(ev) {
  ev.preventDefault();
  const form = ev.target;
  const button = $("submit-button");
  if (button.disabled) return; /* a request is on its way */
  formError(form, null);
  const body = { options: {} };
  for (const input of form.querySelectorAll("input[name], select[name]")) {
    const v = input.type === "checkbox" ? (input.checked ? input.value : "") : input.value.trim();
    if (!v) continue;
    const [a, b] = input.name.split(".");
    if (!b) { body[a] = v; continue; }
    if (input.dataset.boolean) body.options[b] = true;
    else if (b === "include" || b === "exclude") body.options[b] = v.split(",").map((s) => s.trim()).filter(Boolean);
    else if (input.type === "number") body.options[b] = Number(v);
    else body.options[b] = v;
  }
  button.disabled = true;
  button.textContent = "Submitting…";
  try {
    const r = await api("POST", "/api/jobs", body, body.idempotency_key ? {} : { "Idempotency-Key": S.submitKey });
    form.reset();
    S.submitKey = null; /* the next form shown is another request */
    say("Job " + r.job_id + " submitted.");
    location.hash = "#/jobs/" + r.job_id;
  } catch (e) { formError(form, e); }
  finally { button.disabled = false; button.textContent = "Submit"; }
}

/* live updates */
function onJobEvent(ev) {
  if (S.view === "jobs") {
    if (!updateRow(ev) && JOBS.pages.length === 0 && !JOBS.filter.q) scheduleReload();
  } else if (S.view === "job" && String(ev.job_id) === String(S.jobId)) {
    const prev = S.shown || {};
    const j = Object.assign({}, prev, ev);
    if (prev.state !== ev.state || prev.cancel_requested !== ev.cancel_requested) showJob(S.jobId);
    else {
      /* the running attempt's bytes so far, for its mean on the chart */
      if (j.progress && typeof ev.bytes_done === "number")
        j.progress = Object.assign({}, j.progress, { bytes_done: ev.bytes_done });
      S.shown = j;
      noteSample(j);
      const p = $("job-progress");
      if (p) p.replaceChildren(...progressCell(j));
      const c = $("job-chart");
      if (c) c.replaceWith(jobChart(j));
    }
  }
}
let reloadTimer = null;
function scheduleReload() {
  if (reloadTimer) return;
  reloadTimer = setTimeout(() => { reloadTimer = null; if (S.view === "jobs") showJobs().catch(() => {}); }, 500);
}
function startEvents() {
  stopEvents();
  if (!window.EventSource) return startPolling();
  const es = new EventSource("/api/events");
  S.events = es;
  es.addEventListener("job", (m) => { try { onJobEvent(JSON.parse(m.data)); } catch (e) { /* ignore */ } });
  es.addEventListener("signed-out", () => { stopEvents(); signedOut(); });
  es.onopen = () => { if (S.poll) { clearInterval(S.poll); S.poll = null; } };
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) startPolling(); else if (!S.poll) startPolling(); };
}
function startPolling() {
  if (S.poll) return;
  S.poll = setInterval(() => {
    if (document.hidden || !S.user) return;
    if (S.view === "jobs") showJobs().catch(() => {});
    else if (S.view === "job") showJob(S.jobId).catch(() => {});
  }, 3000);
}
function stopEvents() {
  if (S.events) { S.events.close(); S.events = null; }
  if (S.poll) { clearInterval(S.poll); S.poll = null; }
}

/* on a phone each row of a table is a card, each cell under its column's
 * name (app.css): the cells are labelled from their table's head */
function labelCells() {
  for (const t of document.querySelectorAll(".table-wrap table")) {
    const heads = [...t.querySelectorAll("thead th")].map((h) => h.textContent.trim());
    for (const body of t.tBodies)
      for (const tr of body.rows)
        [...tr.cells].forEach((td, i) => {
          if (heads[i] && td.getAttribute("data-label") !== heads[i]) td.setAttribute("data-label", heads[i]);
        });
  }
}

/* wiring */
document.addEventListener("DOMContentLoaded", async () => {
  /* cells only: the observer watches children, so its own attributes do not wake it */
  new MutationObserver(labelCells).observe($("main"), { childList: true, subtree: true });
  $("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    formError(ev.target, null);
    try {
      const info = await api("POST", "/api/session", { user: $("si-user").value, password: $("si-password").value });
      $("si-password").value = "";
      signedIn(info);
      route();
    } catch (e) {
      formError(ev.target, e, e.status === 429 ? "Too many failed sign-ins; try again in a minute." : e.message);
      $("si-password").select(); $("si-password").focus();
    }
  });
  $("signout").addEventListener("click", async () => {
    try { await api("DELETE", "/api/session"); } catch (e) { /* gone anyway */ }
    signedOut();
  });
  listWire(JOBS, "filter-form", () => {
    $("jobs-caption").textContent = "Jobs, " + $("f-sort").selectedOptions[0].textContent;
    return { state: $("f-state").value, q: $("f-q").value.trim(), owner: $("f-owner").value.trim(),
      limit: $("f-limit").value, sort: $("f-sort").value };
  });
  $("select-all").addEventListener("change", (ev) => {
    for (const c of document.querySelectorAll("#jobs-table .sel")) c.checked = ev.target.checked;
  });
  $("bulk-cancel").addEventListener("click", () => bulk("cancel", selected()));
  $("bulk-delete").addEventListener("click", () => bulk("delete", selected()));
  $("bulk-cancel-all").addEventListener("click", () => allMatching("cancel").catch((e) => say(e.message)));
  $("bulk-delete-all").addEventListener("click", () => allMatching("delete").catch((e) => say(e.message)));
  $("submit-form").addEventListener("submit", submitJob);
  $("limits-add").addEventListener("submit", addLimits);
  $("grant-form").addEventListener("submit", grantFrom);
  listWire(EXPORTS, "exports-filter", () => ({ state: $("x-state").value }));
  window.addEventListener("hashchange", () => route().catch((e) => say(e.message)));
  try {
    signedIn(await api("GET", "/api/session"));
    route().catch((e) => say(e.message));
  } catch (e) {
    signedOut();
  }
});
