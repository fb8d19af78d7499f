/*
 * Remora web client: exports (remora_export): the Export form of a
 * succeeded job's page, the Exports list, and an export's page with its
 * references, attempts, decisions and actions.  It uses what app.js
 * defines (el, api, S, kv, status, formError, lists, ...); a classic
 * script, loaded after app.js (whose wiring runs once the page is loaded,
 * when this one has run too).
 */
"use strict";
/* exports: copies of a succeeded job's result at stable keys (remora_export) */
const EXPORT_FIELDS = [["bucket", "Bucket", "input"], ["prefix", "Prefix", "input"],
  ["if_exists", "If a key exists", "select"], ["options.label", "Label", "input"],
  ["idempotency_key", "Idempotency key", "input"]];
function exportForm(j) {
  const field = ([name, text, kind]) => {
    const id = "e-" + name.replace(".", "-");
    const control = kind === "select"
      ? el("select", { id, name, "aria-describedby": id + "-err" },
        el("option", { value: "fail" }, "fail (default)"), el("option", { value: "overwrite" }, "overwrite"),
        el("option", { value: "skip_identical" }, "skip identical"))
      : el("input", { id, name, "aria-describedby": id + "-err",
        value: name === "bucket" ? (j.bucket || "") : null, required: name === "prefix" ? true : null });
    return el("div", {}, el("label", { for: id }, text), control, el("p", { id: id + "-err", class: "error field-error" }));
  };
  return el("form", { id: "export-form", class: "card", novalidate: true, "data-key": newKey(),
    onsubmit: (ev) => exportJob(ev, j.job_id) },
    el("p", { class: "hint" }, "Copy every member to <prefix>/<path> in the bucket, server-side. " +
      "Deleting the job later leaves the exported keys in place."),
    el("div", { class: "grid" }, EXPORT_FIELDS.map(field)),
    el("p", { id: "export-error", class: "error", role: "alert" }),
    el("button", { type: "submit" }, "Export"));
}
async function exportJob(ev, id) {
  ev.preventDefault();
  const form = ev.target;
  formError(form, null);
  const body = { options: {} };
  for (const input of form.querySelectorAll("[name]")) {
    const v = input.value.trim();
    const [a, b] = input.name.split(".");
    if (!v && a !== "prefix") continue;
    if (b) body.options[b] = v; else body[a] = v;
  }
  /* never the bucket's root by accident: the server refuses it too */
  if (!body.prefix.replace(/^\/+|\/+$/g, "")) {
    formError(form, new ApiError(400, { error: "A prefix is required: an export never writes to the bucket's root.",
      field: "prefix" }));
    return;
  }
  const button = form.querySelector("button[type=submit]");
  if (button.disabled) return;
  button.disabled = true;
  try {
    const r = await api("POST", "/api/jobs/" + id + "/export", body,
      body.idempotency_key ? {} : { "Idempotency-Key": form.dataset.key });
    say("Export " + r.export_id + " created.", true);
    location.hash = "#/exports/" + r.export_id;
  } catch (e) { formError(form, e); }
  finally { button.disabled = false; }
}
async function loadJobExports(id) {
  const d = await api("GET", "/api/exports?job=" + id + "&limit=20");
  if (!d.exports.length || !$("job-exports")) return;
  $("job-exports").replaceChildren(el("p", {}, "Exports of this job:"),
    el("ul", {}, d.exports.map((x) => el("li", {}, el("a", { href: "#/exports/" + x.export_id }, "#" + x.export_id),
      " ", stateBadge(x.state), " ", el("span", { class: "mono" }, "s3://" + x.bucket + "/" + x.prefix)))));
}
function exportTarget(x) { return "s3://" + (x.bucket || "") + "/" + (x.prefix || ""); }
function exportRow(x) {
  return el("tr", { "data-export": x.export_id },
    el("td", {}, el("a", { href: "#/exports/" + x.export_id }, "#" + x.export_id)),
    el("td", { class: "st" }, stateBadge(x.state)),
    el("td", {}, el("a", { href: "#/jobs/" + x.job_id }, "#" + x.job_id)),
    el("td", { class: "src mono" }, exportTarget(x)),
    el("td", {}, x.members_done + " / " + x.members), el("td", {}, bytes(x.bytes)),
    el("td", {}, when(x.created_at)));
}
/* exports list */
const EXPORTS = newList({
  view: "exports", path: "/api/exports", items: "exports", id: "export_id", row: exportRow,
  table: "exports-table", empty: "exports-empty", nextButton: "xpage-next", firstButton: "xpage-first",
  filter: { state: "" },
  query(f) {
    const p = new URLSearchParams();
    if (f.state) p.set("state", f.state);
    p.set("limit", "50");
    return p;
  }
});
function showExports() { return loadList(EXPORTS); }
async function showExport(id) {
  show("export");
  if (S.exportId !== id) {
    S.exportId = id;
    $("export-h").textContent = "Export #" + id;
    $("export-body").replaceChildren(el("p", {}, "Loading…"));
  }
  if (S.xtimer) { clearTimeout(S.xtimer); S.xtimer = null; }
  let x;
  try { x = await api("GET", "/api/exports/" + id); }
  catch (e) {
    $("export-body").replaceChildren(el("p", { class: "error", role: "alert" }, e.message));
    return;
  }
  if (S.view !== "export" || S.exportId !== id) return;
  renderExport(x);
  /* exports are not in the job event stream: look again while one moves */
  if (["queued", "running", "retrying"].includes(x.state))
    S.xtimer = setTimeout(() => { S.xtimer = null; if (S.view === "export" && S.exportId === id) showExport(id).catch(() => {}); }, 1500);
}
function renderExport(x) {
  $("export-h").textContent = "Export #" + x.export_id + (x.label ? " — " + x.label : "");
  const active = ["queued", "running", "retrying"].includes(x.state);
  const unknown = x.state === "outcome_unknown";
  const buttons = [];
  if (unknown) {
    buttons.push(el("button", { type: "button", id: "act-verify", onclick: () => resolveExport(x.export_id, "verify") }, "Verify"));
    if (S.admin) buttons.push(
      el("button", { type: "button", class: "secondary", id: "act-retry", onclick: () => resolveExport(x.export_id, "retry") }, "Retry (admin)"),
      el("button", { type: "button", class: "danger", id: "act-fail", onclick: () => resolveExport(x.export_id, "fail") }, "Mark failed (admin)"));
  }
  if (active) buttons.push(el("button", { type: "button", id: "act-xcancel", disabled: x.cancel_requested,
    onclick: () => resolveExport(x.export_id, "cancel") }, x.cancel_requested ? "Cancelling…" : "Cancel"));
  buttons.push(el("button", { type: "button", class: "danger", id: "act-xdelete",
    onclick: () => resolveExport(x.export_id, "delete") }, "Delete"),
  el("span", { id: "export-status", class: "status", role: "status" },
    S.exportStatus && S.exportStatus.id === String(x.export_id) ? S.exportStatus.text : ""));
  const err = x.last_error;
  const summary = kv([
    ["State", stateBadge(x.state)], ["Verifying", x.verifying ? "yes: observing the targets" : null],
    ["Job", el("a", { href: "#/jobs/" + x.job_id }, "#" + x.job_id)], ["Owner", x.owner],
    ["Target", exportTarget(x)], ["If a key exists", x.if_exists],
    ["Members", x.members_done + " / " + x.members], ["Size", bytes(x.bytes)],
    ["Attempts", x.attempts_used + " of " + x.max_attempts],
    ["Created", when(x.created_at)], ["Started", when(x.started_at)], ["Finished", when(x.finished_at)],
    ["Last error", err ? errorText(err) : null],
    ["Output digest", x.output_digest], ["Publication digest", x.publication_digest],
    ["Source digest", x.source_digest], ["Idempotency key", x.idempotency_key]]);
  const note = unknown ? el("p", { class: "hint", id: "unknown-note" },
    "A copy was sent without a conclusive answer, so nothing retries it on its own. " +
    "Verify looks at the targets and concludes succeeded only if every member is exactly there.") : null;
  const refs = el("table", { id: "references-table" },
    el("caption", { class: "sr-only" }, "References"),
    el("thead", {}, el("tr", {}, ["Key", "ETag", "Version", "Size", "Outcome"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, (x.references || []).map((r) => el("tr", {},
      el("td", { class: "mono" }, r.key), el("td", { class: "mono" }, r.etag || ""),
      el("td", { class: "mono" }, r.version_id || ""), el("td", {}, bytes(r.size)), el("td", {}, r.outcome || "")))));
  const attempts = el("table", {},
    el("caption", { class: "sr-only" }, "Attempts"),
    el("thead", {}, el("tr", {}, ["#", "Token", "Started", "Finished", "State", "Error"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, (x.attempts || []).map((a) => el("tr", {},
      el("td", {}, a.attempt_no), el("td", {}, a.fencing_token), el("td", {}, when(a.started_at)),
      el("td", {}, when(a.finished_at)), el("td", {}, a.state),
      el("td", {}, errorText(a.error))))));
  const decisions = (x.decisions || []).map((d) => el("li", {}, d.action + " by " + d.by + ", " + when(d.at)));
  $("export-body").replaceChildren(el("div", { class: "actions" }, buttons), ...(note ? [note] : []), summary,
    el("h2", {}, "References"), (x.references || []).length ? el("div", { class: "table-wrap" }, refs) : el("p", {}, "None yet."),
    el("h2", {}, "Attempts"), el("div", { class: "table-wrap" }, attempts),
    ...(decisions.length ? [el("h2", {}, "Decisions"), el("ul", { id: "decisions" }, decisions)] : []));
}
async function resolveExport(id, action) {
  try {
    if (action === "fail" && !confirm("Mark export " + id + " failed?")) return;
    if (action === "delete") {
      if (!confirm("Delete export " + id + "? The keys it published stay.")) return;
      await api("DELETE", "/api/exports/" + id);
      say("Export " + id + " deleted; the keys it published stay.", true);
      location.hash = "#/exports";
      return;
    }
    const r = action === "cancel" ? await api("POST", "/api/exports/" + id + "/cancel")
      : await api("POST", "/api/exports/" + id + "/resolve", { action });
    S.exportStatus = { id: String(id), text: "Export " + id + ": " + r.state + "." };
  } catch (e) {
    S.exportStatus = { id: String(id), text: e.message + (e.data && e.data.hint ? " " + e.data.hint : "") };
  }
  if (S.view === "export") showExport(String(id));
}
