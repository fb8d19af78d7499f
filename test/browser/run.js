// The web client in a real browser: Debian's chromium, headless, driven
// through the Chrome DevTools Protocol over its WebSocket (Node's own
// WebSocket client, node --experimental-websocket: no npm package, no
// browser download).  Run by test/e2e/browser.sh against the real stack;
// prints TAP-style lines.
//
// Charts (web/charts.js) are looked at through their SVG: dots (.pt) per
// series, each titled with its value.
// Environment: H (the web server's base URL), SRC (nginx's base URL), WWW
// (the folder nginx serves), SHOTS (a folder for screenshots, optional),
// CHROMIUM (the browser binary).  browser.sh has the fault proxy in front
// of the store answer the first copy to webunknown/ with a 500.
"use strict";
const { spawn } = require("node:child_process");
const crypto = require("node:crypto");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const H = process.env.H, SRC = process.env.SRC, WWW = process.env.WWW;
const SHOTS = process.env.SHOTS || "";
let failed = 0;
const ok = (name) => console.log("ok - browser: " + name);
const notOk = (name, why) => { failed++; console.log("not ok - browser: " + name + (why ? " (" + why + ")" : "")); };

function launch() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "remora-chromium-"));
  const args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--remote-debugging-port=0",
    "--remote-debugging-address=127.0.0.1", "--window-size=1280,900",
    "--user-data-dir=" + dir, "about:blank"];
  const proc = spawn(process.env.CHROMIUM || "chromium", args, { stdio: ["ignore", "ignore", "pipe"] });
  return new Promise((resolve, reject) => {
    let err = "";
    const timer = setTimeout(() => reject(new Error("chromium did not start: " + err.slice(-500))), 30000);
    proc.stderr.on("data", (d) => {
      err += d;
      const m = err.match(/DevTools listening on (ws:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve({ proc, url: m[1], dir }); }
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error("chromium exited " + code + ": " + err.slice(-500))); });
  });
}

class Cdp {
  constructor(url) {
    this.ws = new WebSocket(url);
    this.id = 0; this.pending = new Map(); this.handlers = [];
    this.ws.onmessage = (m) => {
      const msg = JSON.parse(m.data);
      if (msg.id && this.pending.has(msg.id)) {
        const { resolve, reject } = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        if (msg.error) reject(new Error(JSON.stringify(msg.error))); else resolve(msg.result);
      } else if (msg.method) for (const h of this.handlers) h(msg);
    };
  }
  open() { return new Promise((res, rej) => { this.ws.onopen = res; this.ws.onerror = rej; }); }
  send(method, params, sessionId) {
    const id = ++this.id;
    this.ws.send(JSON.stringify({ id, method, params: params || {}, sessionId }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }
}

// A tab in its own browser context (its own cookies): one signed-in user.
class Tab {
  constructor(cdp, sessionId) { this.cdp = cdp; this.sid = sessionId; }
  static async open(cdp) {
    const { browserContextId } = await cdp.send("Target.createBrowserContext");
    const { targetId } = await cdp.send("Target.createTarget", { url: "about:blank", browserContextId });
    const { sessionId } = await cdp.send("Target.attachToTarget", { targetId, flatten: true });
    const t = new Tab(cdp, sessionId);
    await t.send("Page.enable");
    await t.send("Runtime.enable");
    // confirm() dialogs are accepted, as a user would
    cdp.handlers.push((msg) => {
      if (msg.sessionId === sessionId && msg.method === "Page.javascriptDialogOpening")
        t.send("Page.handleJavaScriptDialog", { accept: true }).catch(() => {});
    });
    return t;
  }
  send(m, p) { return this.cdp.send(m, p, this.sid); }
  async eval(expr) {
    const r = await this.send("Runtime.evaluate", { expression: expr, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) throw new Error("page: " + (r.exceptionDetails.exception ? r.exceptionDetails.exception.description : r.exceptionDetails.text));
    return r.result.value;
  }
  async waitFor(expr, seconds) {
    const deadline = Date.now() + (seconds || 20) * 1000;
    let last;
    for (;;) {
      try { last = await this.eval(expr); if (last) return last; } catch (e) { last = e.message; }
      if (Date.now() > deadline) throw new Error("timed out waiting for " + expr + " (last: " + last + ")");
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  async goto(url) {
    await this.send("Page.navigate", { url });
    await this.waitFor("document.readyState === 'complete'");
  }
  async fill(id, value) {
    await this.eval(`(() => { const e = document.getElementById(${JSON.stringify(id)}); e.focus(); e.value = ${JSON.stringify(value)}; e.dispatchEvent(new Event('input', {bubbles: true})); })()`);
  }
  async click(selector) {
    await this.eval(`document.querySelector(${JSON.stringify(selector)}).click()`);
  }
  text(selector) { return this.eval(`(document.querySelector(${JSON.stringify(selector)}) || {}).textContent || ""`); }
  visible(id) { return this.eval(`!document.getElementById(${JSON.stringify(id)}).hidden`); }
  async shot(name) {
    if (!SHOTS) return;
    const { data } = await this.send("Page.captureScreenshot", { format: "png" });
    fs.writeFileSync(path.join(SHOTS, name + ".png"), Buffer.from(data, "base64"));
  }
  async signIn(user, password) {
    await this.goto(H + "/");
    await this.waitFor("!document.getElementById('signin-view').hidden");
    await this.fill("si-user", user);
    await this.fill("si-password", password);
    await this.click("#signin-form button[type=submit]");
  }
}

async function step(name, fn) {
  try { await fn(); ok(name); } catch (e) { notOk(name, e.message.slice(0, 300)); }
}

function sha256(buf) { return crypto.createHash("sha256").update(buf).digest("hex"); }

async function submit(tab, source, label) {
  await tab.goto(H + "/#/submit");
  await tab.waitFor("!document.getElementById('submit-view').hidden");
  await tab.fill("s-source", source);
  await tab.fill("s-label", label || "");
  await tab.click("#submit-form button[type=submit]");
  const id = await tab.waitFor("(location.hash.match(/^#\\/jobs\\/(\\d+)$/) || [])[1] || " +
    "[...document.querySelectorAll('#submit-form .error')].map((e) => e.textContent).join(' ').trim()");
  if (!/^\d+$/.test(id)) throw new Error("refused: " + id);
  await tab.waitFor("document.getElementById('job-h').textContent.startsWith('Job #" + id + "')");
  return id;
}

async function main() {
  const { proc, url, dir } = await launch();
  const cdp = new Cdp(url);
  await cdp.open();
  try {
    const alice = await Tab.open(cdp);
    let job, slowJob;

    await step("the sign-in form is shown, and no navigation before sign-in", async () => {
      await alice.goto(H + "/");
      await alice.waitFor("!document.getElementById('signin-view').hidden");
      if (!(await alice.eval("getComputedStyle(document.getElementById('nav')).display === 'none' && " +
        "getComputedStyle(document.getElementById('signout')).display === 'none'")))
        throw new Error("the navigation shows before sign-in");
      await alice.shot("web-signin");
    });
    await step("a wrong password is refused, with a message", async () => {
      await alice.signIn("alice", "wrong");
      await alice.waitFor("document.getElementById('signin-error').textContent.length > 0");
      if (!(await alice.eval("document.activeElement.id === 'si-password'"))) throw new Error("the focus is not back on the password");
      if (!(await alice.visible("signin-view"))) throw new Error("left the sign-in page");
    });
    await step("the right password signs in and shows the jobs", async () => {
      await alice.signIn("alice", "alice-pw");
      await alice.waitFor("!document.getElementById('jobs-view').hidden");
      const who = await alice.text("#who");
      if (who !== "Signed in as alice") throw new Error(who);
      const where = await alice.eval("[document.title, (document.querySelector('#nav a[aria-current=page]') || {}).textContent, document.activeElement.id]");
      if (where.join("|") !== "Jobs — Remora|Jobs|jobs-h") throw new Error("title, current link, focus: " + where.join(", "));
    });
    await step("the session cookie is not readable by scripts (HttpOnly)", async () => {
      const c = await alice.eval("document.cookie");
      if (c.includes("remora_session")) throw new Error(c);
    });
    await step("the form says where a job goes by default, and a refused target names where one may write", async () => {
      await alice.goto(H + "/#/submit");
      await alice.waitFor("!document.getElementById('submit-view').hidden");
      await alice.waitFor("document.getElementById('s-bucket').placeholder === 'target (the default)'");
      await alice.fill("s-source", SRC + "/web.bin");
      await alice.fill("s-bucket", "elsewhere");
      await alice.click("#submit-form button[type=submit]");
      await alice.waitFor("document.getElementById('submit-error').textContent.includes('may be written: target/')");
      await alice.fill("s-bucket", "");
    });
    await step("SQL's validation message is shown beside the field", async () => {
      await alice.goto(H + "/#/submit");
      await alice.waitFor("!document.getElementById('submit-view').hidden");
      await alice.fill("s-source", SRC + "/web.bin");
      await alice.fill("s-conn", "500");
      await alice.click("#submit-form button[type=submit]");
      await alice.waitFor("document.getElementById('s-conn-err').textContent.includes('connections')");
      await alice.waitFor("document.getElementById('s-conn').getAttribute('aria-invalid') === 'true'");
      await alice.shot("web-submit-error");
      await alice.fill("s-conn", "");
    });
    const label = "<img src=x onerror=\"window.__xss=1\">web";
    await step("a download submitted from the form opens its page", async () => {
      job = await submit(alice, SRC + "/web.bin", label);
    });
    await step("a label with markup is shown as text", async () => {
      await alice.waitFor("document.getElementById('job-h').textContent.includes('<img')");
      const imgs = await alice.eval("document.querySelectorAll('main img').length");
      const xss = await alice.eval("window.__xss === 1");
      if (imgs !== 0 || xss) throw new Error("markup was rendered");
    });
    await step("the job finishes and its page shows it without a reload", async () => {
      await alice.eval("window.__stay = 1");
      await alice.waitFor("document.querySelector('#job-body .state') && document.querySelector('#job-body .state').textContent === 'succeeded'", 60);
      if (!(await alice.eval("window.__stay === 1"))) throw new Error("the page was reloaded");
      await alice.waitFor("document.querySelector('#members-table .download')", 20);
      await alice.shot("web-job");
    });
    await step("the job's page charts its attempt's bytes per second, as inline SVG", async () => {
      const pts = "document.querySelectorAll('#job-chart svg .series[data-name=\"mean over the attempt\"] .pt')";
      await alice.waitFor(pts + ".length >= 2");
      const rates = await alice.eval(`[...${pts}].map((c) => c.textContent)`);
      if (rates.some((t) => / 0 B\/s$/.test(t))) throw new Error("a rate of zero: " + rates.join("; "));
      await alice.eval("document.getElementById('job-chart').previousElementSibling.scrollIntoView()");
      await alice.shot("web-job-chart");
    });
    await step("the result says where each member is: its S3 URI and SHA-256, each with a Copy button", async () => {
      const uri = await alice.text("#members-table td.uri .mono");
      const want = await alice.eval(`api("GET", "/api/jobs/${job}/result").then((r) => "s3://" + r.members[0].bucket + "/" + r.members[0].key)`);
      if (uri !== want) throw new Error("S3 URI shown: " + uri + ", want " + want);
      if (!(await alice.eval("document.getElementById('result-uri').textContent.startsWith('s3://')"))) throw new Error("no result URI in the summary");
      await alice.click("#members-table td.sha button.copy");
      await alice.waitFor("document.getElementById('members-status').textContent.startsWith('Copied the SHA-256 of')");
      const copied = await alice.eval("document.querySelector('#members-table td.sha button.copy').dataset.copy");
      if (copied !== sha256(fs.readFileSync(path.join(WWW, "web.bin")))) throw new Error("the SHA-256 copied: " + copied);
      await alice.click("#members-table .download");
      await alice.waitFor("document.getElementById('members-status').textContent.startsWith('Downloading')");
      if (!(await alice.eval("window.__stay === 1"))) throw new Error("the download took the page away");
    });
    await step("the member's download link gives the file (same SHA-256)", async () => {
      await alice.click("#members-table .copy-link");
      const href = await alice.waitFor("(document.querySelector('#members-status a.download-link') || {}).href");
      const r = await fetch(href);
      const got = sha256(Buffer.from(await r.arrayBuffer()));
      const want = sha256(fs.readFileSync(path.join(WWW, "web.bin")));
      if (got !== want) throw new Error("sha256 " + got + " != " + want);
    });
    let reusedJob;
    await step("\"Reuse the latest result\": the unchanged file is copied from that job, and the page says so", async () => {
      await alice.goto(H + "/#/submit");
      await alice.waitFor("!document.getElementById('submit-view').hidden");
      await alice.fill("s-source", SRC + "/web.bin");
      await alice.click("#s-reuse");
      await alice.click("#submit-form button[type=submit]");
      const id = await alice.waitFor("(location.hash.match(/^#\\/jobs\\/(\\d+)$/) || [])[1]");
      await alice.waitFor("document.getElementById('job-h').textContent.startsWith('Job #" + id + "')");
      await alice.waitFor("document.querySelector('#members-table .action')", 60);
      const how = await alice.text("#members-table .action");
      if (how !== "copied from #" + job) throw new Error("job " + id + ": " + how);
      await alice.waitFor("[...document.querySelectorAll('#job-body dt')].some((d) => d.textContent === 'Reused')");
      await alice.shot("web-job-reused");
      reusedJob = id;
    });
    await step("\"Dry run\": the result says what would be copied, and offers nothing to download", async () => {
      await alice.goto(H + "/#/submit");
      await alice.waitFor("!document.getElementById('submit-view').hidden");
      await alice.fill("s-source", SRC + "/web.bin");
      await alice.click("#s-reuse");
      await alice.click("#s-dry");
      await alice.click("#submit-form button[type=submit]");
      const id = await alice.waitFor("(location.hash.match(/^#\\/jobs\\/(\\d+)$/) || [])[1]");
      await alice.waitFor("document.getElementById('job-h').textContent.startsWith('Job #" + id + " (dry run)')");
      await alice.waitFor("document.querySelector('#members-table .action')", 60);
      const how = await alice.text("#members-table .action");
      if (how !== "would copy from #" + reusedJob) throw new Error("job " + id + ": " + how);
      if (await alice.eval("!!document.querySelector('#members-table .download')")) throw new Error("a download button on a plan");
      await alice.shot("web-job-dry-run");
    });
    let exported, unknownExport;
    const exportFrom = async (prefix, label) => {
      // the job page's previous rendering must not be the one filled in
      await alice.eval(`document.getElementById('job-body').replaceChildren();
        if (location.hash === '#/jobs/${job}') route(); else location.hash = '#/jobs/${job}'`);
      await alice.waitFor("document.getElementById('export-form')", 20);
      await alice.fill("e-prefix", prefix);
      await alice.fill("e-options-label", label || "");
      await alice.click("#export-form button[type=submit]");
      const id = await alice.waitFor("(location.hash.match(/^#\\/exports\\/(\\d+)$/) || [])[1] || " +
        "[...document.querySelectorAll('#export-form .error')].map((e) => e.textContent).join(' ').trim()");
      if (!/^\d+$/.test(id)) throw new Error("refused: " + id);
      await alice.waitFor("document.getElementById('export-h').textContent.startsWith('Export #" + id + "')");
      return id;
    };
    const exportState = "(document.querySelector('#export-body .state') || {}).textContent";
    await step("the succeeded job's page has an Export form; SQL's message is shown beside its field", async () => {
      await alice.goto(H + "/#/jobs/" + job);
      await alice.waitFor("document.getElementById('export-form')", 20);
      if ((await alice.eval("document.getElementById('e-bucket').value")) !== "target") throw new Error("the bucket is not the job's");
      await alice.fill("e-prefix", "a/../b");
      await alice.click("#export-form button[type=submit]");
      await alice.waitFor("document.getElementById('e-prefix-err').textContent.includes('prefix')");
      await alice.waitFor("document.getElementById('e-prefix').getAttribute('aria-invalid') === 'true'");
    });
    await step("an empty Prefix is refused in the form, beside the field, and no export is made", async () => {
      const before = await alice.eval(`api("GET", "/api/exports?job=${job}").then((d) => d.exports.length)`);
      await alice.fill("e-prefix", "  ");
      await alice.click("#export-form button[type=submit]");
      await alice.waitFor("document.getElementById('e-prefix-err').textContent.includes('bucket\\'s root')");
      const after = await alice.eval(`api("GET", "/api/exports?job=${job}").then((d) => d.exports.length)`);
      if (after !== before) throw new Error("an export was made: " + before + " -> " + after);
      /* and the API refuses it too, whatever a client sends */
      const st = await alice.eval(`api("POST", "/api/jobs/${job}/export", { bucket: "target", prefix: "" })
        .then(() => "made", (e) => e.status + " " + e.data.sqlstate)`);
      if (st !== "400 22023") throw new Error("the API answered " + st);
    });
    const xlabel = "<img src=x onerror=\"window.__xss=2\">export";
    await step("Export copies the result to the stable prefix and its page shows the reference", async () => {
      exported = await exportFrom("webexport", xlabel);
      await alice.waitFor(exportState + " === 'succeeded'", 60);
      await alice.waitFor("[...document.querySelectorAll('#references-table td')].some((td) => td.textContent === 'webexport/web.bin')", 20);
      await alice.shot("web-export");
    });
    await step("an export's label with markup is shown as text", async () => {
      await alice.waitFor("document.getElementById('export-h').textContent.includes('<img')");
      const imgs = await alice.eval("document.querySelectorAll('main img').length");
      if (imgs !== 0 || (await alice.eval("window.__xss === 2"))) throw new Error("markup was rendered");
    });
    await step("a copy answered 500 leaves an export outcome_unknown, with a Verify button and no admin buttons", async () => {
      unknownExport = await exportFrom("webunknown");
      await alice.waitFor(exportState + " === 'outcome_unknown'", 60);
      await alice.waitFor("document.getElementById('act-verify')");
      if (await alice.eval("!!document.getElementById('act-retry') || !!document.getElementById('act-fail')"))
        throw new Error("a remora_user is offered retry or fail");
      await alice.shot("web-export-unknown");
    });
    await step("Verify observes the targets: the member is missing, so it stays outcome_unknown and says so", async () => {
      await alice.click("#act-verify");
      await alice.waitFor(exportState + " === 'outcome_unknown' && document.querySelector('#decisions') && " +
        "[...document.querySelectorAll('#export-body dd')].some((d) => d.textContent.includes('webunknown/web.bin (missing)'))", 60);
    });
    await step("the exports list shows both, and its state filter shows outcome_unknown alone", async () => {
      await alice.goto(H + "/#/exports");
      await alice.waitFor(`document.querySelector('tr[data-export="${exported}"]') && document.querySelector('tr[data-export="${unknownExport}"]')`);
      const st = await alice.text(`tr[data-export="${unknownExport}"] .state`);
      if (st !== "outcome_unknown") throw new Error("state shown: " + st);
      await alice.shot("web-exports");
      await alice.eval("document.getElementById('x-state').value = 'outcome_unknown'");
      await alice.click("#exports-filter button[type=submit]");
      await alice.waitFor(`!document.querySelector('tr[data-export="${exported}"]') && document.querySelector('tr[data-export="${unknownExport}"]')`);
      await alice.click(`tr[data-export="${unknownExport}"] a`);
      await alice.waitFor("location.hash === '#/exports/" + unknownExport + "' && document.getElementById('act-verify')");
    });

    await step("a slow download's progress moves on the page without a reload", async () => {
      slowJob = await submit(alice, SRC + "/slow/webslow.bin", "slow");
      await alice.eval("window.__stay = 2");
      await alice.waitFor("document.querySelector('#job-body .state').textContent === 'running'", 30);
      const first = await alice.waitFor("(() => { const p = document.querySelector('#job-progress progress'); return p && p.value > 0 && p.value; })()", 30);
      await alice.waitFor("(() => { const p = document.querySelector('#job-progress progress'); return p && p.value > " + first + "; })()", 30);
      if (!(await alice.eval("window.__stay === 2"))) throw new Error("the page was reloaded");
      await alice.shot("web-progress");
    });
    await step("the live rates of the running attempt are added to its chart", async () => {
      await alice.waitFor("document.querySelectorAll('#job-chart .series[data-name=\"live, while this page is open\"] .pt').length >= 2", 30);
    });
    await step("cancel stops the running job, and says so next to the buttons", async () => {
      await alice.click("#act-cancel");
      await alice.waitFor("document.querySelector('#job-body .state').textContent === 'cancelled'", 30);
      await alice.waitFor("['Cancelled.', 'Job cancelled.'].includes(document.getElementById('job-status').textContent)");
    });
    await step("Retry of the cancelled job makes a new job of the same source, and its page says whence", async () => {
      await alice.click("#act-retry");
      const id = await alice.waitFor("(location.hash.match(/^#\\/jobs\\/(\\d+)$/) || [])[1] !== " + JSON.stringify(slowJob) +
        " && (location.hash.match(/^#\\/jobs\\/(\\d+)$/) || [])[1]");
      await alice.waitFor("document.getElementById('job-h').textContent.startsWith('Job #" + id + "')");
      await alice.waitFor("document.getElementById('job-status').textContent === 'A retry of job #" + slowJob + ".'");
      const same = await alice.eval(`Promise.all([${slowJob}, ${id}].map((i) => api("GET", "/api/jobs/" + i)))
        .then(([a, b]) => a.source === b.source && a.label === b.label)`);
      if (!same) throw new Error("the retry is not the same request");
      await alice.eval(`api("POST", "/api/jobs/${id}/cancel")`);
      await alice.shot("web-job-retry");
    });
    await step("the jobs list shows both jobs, with a state filter", async () => {
      await alice.goto(H + "/#/jobs");
      await alice.waitFor(`document.querySelector('tr[data-job="${job}"]') && document.querySelector('tr[data-job="${slowJob}"]')`);
      await alice.shot("web-jobs");
      await alice.eval("document.getElementById('f-state').value = 'succeeded'");
      await alice.click("#filter-form button[type=submit]");
      await alice.waitFor(`!document.querySelector('tr[data-job="${slowJob}"]') && document.querySelector('tr[data-job="${job}"]')`);
    });

    await step("cancel of the selected jobs, then delete of all that match a search", async () => {
      const ids = await alice.eval(`Promise.all([1, 2].map((i) => api("POST", "/api/jobs",
        { source: ${JSON.stringify(SRC + "/slow/webslow.bin")}, options: { label: "bulk " + i } })
        .then((r) => String(r.job_id))))`);
      await alice.eval("document.getElementById('f-state').value = ''; document.getElementById('f-q').value = 'bulk'");
      await alice.click("#filter-form button[type=submit]");
      await alice.waitFor(ids.map((id) => `document.querySelector('tr[data-job="${id}"] .sel')`).join(" && "));
      for (const id of ids) await alice.click(`tr[data-job="${id}"] .sel`);
      await alice.click("#bulk-cancel");
      /* each job cancelled at once, or stopping: two in all, none refused */
      await alice.waitFor(`(() => { const t = document.getElementById('bulk-status').textContent;
        return [...t.matchAll(/(\\d+) (cancelled|stopping)/g)].reduce((a, m) => a + Number(m[1]), 0) === 2 &&
          !/refused|already/.test(t); })()`);
      for (const id of ids)
        await alice.waitFor(`fetch('/api/jobs/${id}').then((r) => r.json()).then((j) => j.state === 'cancelled')`, 30);
      await alice.click("#bulk-delete-all");
      await alice.waitFor("document.getElementById('bulk-status').textContent === '2 deleted.'");
      await alice.waitFor(ids.map((id) => `!document.querySelector('tr[data-job="${id}"]')`).join(" && "));
      for (const id of ids) {
        const st = await alice.eval(`fetch('/api/jobs/${id}').then((r) => r.status)`);
        if (st !== 404) throw new Error("job " + id + " still there: " + st);
      }
      await alice.eval("document.getElementById('f-q').value = ''");
      await alice.click("#filter-form button[type=submit]");
    });

    await step("the list's order changes with the chosen sort (submitted, priority; both ways)", async () => {
      const hi = await alice.eval(`api("POST", "/api/jobs", { source: ${JSON.stringify(SRC + "/web.bin")},
        options: { label: "sortcheck high", priority: 7 } }).then((r) => String(r.job_id))`);
      const lo = await alice.eval(`api("POST", "/api/jobs", { source: ${JSON.stringify(SRC + "/web.bin")},
        options: { label: "sortcheck low", priority: -3 } }).then((r) => String(r.job_id))`);
      const order = (sort) => alice.eval(`document.getElementById('f-q').value = 'sortcheck';
        document.getElementById('f-sort').value = ${JSON.stringify(sort)};
        document.querySelector('#filter-form button[type=submit]').click()`);
      const rows = "[...document.querySelectorAll('#jobs-table tbody tr')].map((r) => r.dataset.job).join(',')";
      for (const [sort, want] of [["submitted:desc", [lo, hi]], ["submitted:asc", [hi, lo]],
        ["priority:desc", [hi, lo]], ["priority:asc", [lo, hi]]]) {
        await order(sort);
        try { await alice.waitFor(rows + " === " + JSON.stringify(want.join(","))); }
        catch (e) { throw new Error(sort + ": rows " + await alice.eval(rows) + ", want " + want.join(",")); }
      }
      await alice.eval("document.getElementById('f-q').value = ''");
      await alice.click("#filter-form button[type=submit]");
      await alice.waitFor(`document.querySelector('#jobs-table tbody tr').dataset.job === ${JSON.stringify(lo)}`);
      if (!(await alice.text("#jobs-caption")).includes("lowest priority first")) throw new Error("caption not updated");
      await alice.eval("document.getElementById('f-sort').value = 'submitted:desc'");
      await alice.click("#filter-form button[type=submit]");
    });

    await step("a double click on Submit makes one job", async () => {
      await alice.goto(H + "/#/submit");
      await alice.waitFor("!document.getElementById('submit-view').hidden");
      await alice.fill("s-source", SRC + "/web.bin");
      await alice.fill("s-label", "double click");
      await alice.eval("(() => { const b = document.getElementById('submit-button'); b.click(); b.click(); })()");
      await alice.waitFor("/^#\\/jobs\\/\\d+$/.test(location.hash)");
      /* the second click, had it gone out, was answered by now too */
      await alice.waitFor("!document.getElementById('submit-button').disabled");
      const n = await alice.eval(`api("GET", "/api/jobs?q=double%20click&limit=10").then((d) => d.jobs.length)`);
      if (n !== 1) throw new Error(n + " jobs");
    });
    for (const [kind, source, members] of [["an S3 object", "s3://sources/one.bin", 1],
      ["an S3 prefix", "s3://sources/dir/", 2], ["a Hugging Face snapshot", "hf://acme/tiny", 2]]) {
      await step("submit " + kind + " from the form: it succeeds with " + members + " member(s)", async () => {
        const id = await submit(alice, source, kind);
        await alice.waitFor("document.querySelector('#job-body .state') && document.querySelector('#job-body .state').textContent === 'succeeded'", 60);
        await alice.waitFor("document.querySelectorAll('#members-table tbody tr').length === " + members, 20);
        if (id === undefined) throw new Error("no job");
      });
    }

    const bob = await Tab.open(cdp);
    await step("bob, signed in beside alice, does not see her jobs", async () => {
      await bob.signIn("bob", "bob-pw");
      await bob.waitFor("!document.getElementById('jobs-view').hidden");
      await bob.waitFor("document.getElementById('jobs-table').tBodies[0] !== null");
      const n = await bob.eval(`document.querySelectorAll('tr[data-job="${job}"], tr[data-job="${slowJob}"]').length`);
      if (n !== 0) throw new Error("bob sees " + n + " of alice's jobs");
      /* an account with no job says how to begin, not "No jobs." */
      await bob.waitFor("!document.getElementById('jobs-none').hidden && document.getElementById('jobs-empty').hidden");
      await bob.goto(H + "/#/jobs/" + job);
      await bob.waitFor("document.querySelector('#job-body .error')");
    });
    await step("a remora_user has no Admin page", async () => {
      if (!(await bob.eval("document.getElementById('nav-admin').hidden"))) throw new Error("shown");
    });

    const carol = await Tab.open(cdp);
    await step("an admin sees statistics, workers and everyone's jobs", async () => {
      await carol.signIn("carol", "carol-pw");
      await carol.waitFor("!document.getElementById('jobs-view').hidden");
      await carol.waitFor(`document.querySelector('tr[data-job="${job}"]')`);
      await carol.goto(H + "/#/admin");
      await carol.waitFor("document.querySelector('#stats dl') && document.querySelector('#workers table')");
      await carol.waitFor("[...document.querySelectorAll('#workers td.health')].some((td) => td.textContent === 'alive')");
      await carol.shot("web-admin");
    });
    await step("an admin's list says whose each job is, and ?owner= in the URL filters it (the form shows it)", async () => {
      await carol.goto(H + "/#/jobs?owner=alice&limit=500");
      await carol.waitFor("document.getElementById('f-owner').value === 'alice' && document.querySelector('#jobs-table tbody tr')");
      const owners = await carol.eval("[...new Set([...document.querySelectorAll('#jobs-table tbody td.owner')].map((td) => td.textContent))]");
      if (owners.join(",") !== "alice") throw new Error("owners shown: " + owners.join(","));
      if (!(await carol.eval(`!!document.querySelector('tr[data-job="${job}"]')`))) throw new Error("alice's job is not listed");
      await carol.eval("document.getElementById('f-owner').value = 'bob'");
      await carol.click("#filter-form button[type=submit]");
      await carol.waitFor("location.hash === '#/jobs?owner=bob&limit=500'");
      /* bob has no job: an empty list, said so */
      await carol.waitFor("!document.querySelector('#jobs-table tbody tr') && !document.getElementById('jobs-empty').hidden");
      await carol.goto(H + "/#/admin");
      await carol.waitFor("document.querySelector('#stats dl')");
    });
    await step("the admin page charts the last hour: jobs by state and bytes per second, with the jobs that ran", async () => {
      await carol.waitFor("document.querySelector('#chart-states svg') && document.querySelector('#chart-bytes svg')");
      const n = await carol.eval("document.querySelectorAll('#chart-states .pt').length");
      if (n !== 300) throw new Error("jobs by state: " + n + " points, not 5 states of 60 minutes");
      const done = await carol.eval("Math.max(...[...document.querySelectorAll('#chart-states .series[data-name=succeeded] .pt')].map((c) => Number(c.textContent.split(': ').pop())))");
      if (!(done >= 1)) throw new Error("no succeeded job in the hour: " + done);
      const moved = await carol.eval("[...document.querySelectorAll('#chart-bytes .pt')].filter((c) => !/: 0 B\\/s$/.test(c.textContent)).length");
      if (!(moved >= 1)) throw new Error("no minute with bytes moved");
      if ((await carol.text("#stats")).includes("null")) throw new Error("the statistics say null");
      await carol.eval("document.getElementById('charts').previousElementSibling.scrollIntoView()");
      await carol.shot("web-admin-charts");
    });
    await step("an admin sees the source and target grants", async () => {
      await carol.waitFor("document.querySelector('#grants-table')");
      const rows = await carol.eval("[...document.querySelectorAll('#grants-table tbody tr')].map((r) => [...r.cells].slice(0, 4).map((c) => c.textContent).join(' '))");
      if (!rows.includes("source alice sources *")) throw new Error("no source grant row: " + JSON.stringify(rows));
      if (!rows.includes("target alice target *")) throw new Error("no target grant row: " + JSON.stringify(rows));
    });

    const aliceWeight = "(document.querySelector('#limits-table tr[data-role=\"alice\"] td.weight') || {}).textContent";
    await step("an admin sets alice's weight to 3 in the limits form, sees it in the table, and resets it", async () => {
      await carol.waitFor("document.querySelector('#limits-table tbody tr[data-role=\"carol\"]')");
      await carol.fill("l-role", "alice");
      await carol.click("#limits-add button[type=submit]");
      const form = "form.limits-form[data-role=\"alice\"]";
      await carol.waitFor(`document.querySelector('${form} input[name=weight]')`);
      await carol.eval(`(() => { const i = document.querySelector('${form} input[name=weight]'); i.value = "3"; i.dispatchEvent(new Event('input', {bubbles: true})); })()`);
      await carol.eval("document.getElementById('limits-table').scrollIntoView()");
      await carol.shot("web-admin-limits");
      await carol.click(form + " button[type=submit]");
      await carol.waitFor(aliceWeight + " === '3'");
      const api = await carol.eval("fetch('/api/admin/role-limits').then((r) => r.json()).then((d) => d.role_limits.find((r) => r.role === 'alice').weight)");
      if (api !== 3) throw new Error("the API says weight " + api);
      await carol.click("#limits-table tr[data-role=\"alice\"] button[aria-label^=Reset]");
      await carol.waitFor(`(${aliceWeight} || '1') === '1'`);
      const after = await carol.eval("fetch('/api/admin/role-limits').then((r) => r.json()).then((d) => (d.role_limits.find((r) => r.role === 'alice') || { weight: 1 }).weight)");
      if (after !== 1) throw new Error("after the reset the API says weight " + after);
    });
    await step("a weight of 0 is refused next to the field, with the server's message", async () => {
      await carol.fill("l-role", "alice");
      await carol.click("#limits-add button[type=submit]");
      const form = "form.limits-form[data-role=\"alice\"]";
      await carol.waitFor(`document.querySelector('${form} input[name=weight]')`);
      /* the browser's own check would stop 0 (min=1): take it away, as a hostile client would */
      await carol.eval(`(() => { const i = document.querySelector('${form} input[name=weight]'); i.removeAttribute('min'); i.value = "0"; })()`);
      await carol.click(form + " button[type=submit]");
      await carol.waitFor(`document.querySelector('${form} input[name=weight]').getAttribute('aria-invalid') === 'true'`);
      const msg = await carol.eval(`document.getElementById(document.querySelector('${form} input[name=weight]').getAttribute('aria-describedby')).textContent`);
      if (!/invalid weight/.test(msg)) throw new Error("message: " + msg);
      await carol.click(form + " button.secondary");
    });

    await step("an admin grants a role a target from the form, and revokes it from its row", async () => {
      await carol.goto(H + "/#/admin");
      await carol.waitFor("document.getElementById('grant-form') && document.querySelector('#grants-table')");
      await carol.fill("g-role", "bob");
      await carol.fill("g-bucket", "bobshare");
      await carol.fill("g-prefix", "in/*");
      await carol.click("#grant-form button[type=submit]");
      await carol.waitFor("document.getElementById('grants-status').textContent.startsWith('Granted target bobshare/in/*')");
      const row = "[...document.querySelectorAll('#grants-table tbody tr')].find((r) => r.cells[2].textContent === 'bobshare')";
      await carol.waitFor(row);
      await carol.eval(row + ".querySelector('button.revoke').click()");
      await carol.waitFor("document.getElementById('grants-status').textContent.startsWith('Revoked')");
      await carol.waitFor("!(" + row + ")");
    });
    await step("a job held back by its owner's max running says so on its page", async () => {
      await carol.eval(`api("PUT", "/api/admin/role-limits/bob", { max_running: 1 })`);
      const ids = [];
      for (const i of [1, 2])
        ids.push(await bob.eval(`api("POST", "/api/jobs", { source: ${JSON.stringify(SRC + "/slow/webslow.bin")},
          options: { label: "held ${i}" } }).then((r) => String(r.job_id))`));
      await bob.waitFor(`fetch('/api/jobs/${ids[0]}').then((r) => r.json()).then((j) => j.state === 'running')`, 30);
      await bob.goto(H + "/#/jobs/" + ids[1]);
      await bob.waitFor("document.getElementById('job-waiting').textContent.includes('max running 1')", 20);
      await bob.shot("web-job-waiting");
      for (const id of ids) await bob.eval(`api("POST", "/api/jobs/${id}/cancel")`);
      await carol.eval(`api("DELETE", "/api/admin/role-limits/bob")`);
    });
    await step("an admin retries the export whose outcome is unknown, from its page", async () => {
      await carol.goto(H + "/#/exports/" + unknownExport);
      await carol.waitFor("document.getElementById('act-retry')", 20);
      await carol.click("#act-retry");
      await carol.waitFor("(document.querySelector('#export-body .state') || {}).textContent === 'succeeded'", 60);
      const refs = await carol.eval("[...document.querySelectorAll('#references-table td')].map((td) => td.textContent)");
      if (!refs.includes("webunknown/web.bin")) throw new Error("references: " + JSON.stringify(refs));
    });

    // accessibility and phones: a tab of its own, signed in by keyboard only
    const phone = await Tab.open(cdp);
    const pressKey = async (key, code, vk, text) => {
      await phone.send("Input.dispatchKeyEvent", { type: "keyDown", key, code, windowsVirtualKeyCode: vk, text });
      await phone.send("Input.dispatchKeyEvent", { type: "keyUp", key, code, windowsVirtualKeyCode: vk });
    };
    // Tab until the expression (about document.activeElement) holds
    const tabTo = async (expr, what) => {
      for (let i = 0; i < 15; i++) {
        if (await phone.eval(expr)) return;
        await pressKey("Tab", "Tab", 9);
      }
      throw new Error("Tab never reaches " + what + "; focus on " + await phone.eval("document.activeElement.outerHTML.slice(0, 80)"));
    };
    await step("the keyboard alone signs in: Tab reaches the fields and the sign-in button, focus is visible", async () => {
      await phone.goto(H + "/");
      await phone.waitFor("!document.getElementById('signin-view').hidden");
      await tabTo("document.activeElement.id === 'si-user'", "the role field");
      await phone.send("Input.insertText", { text: "carol" });
      await tabTo("document.activeElement.id === 'si-password'", "the password field");
      await phone.send("Input.insertText", { text: "carol-pw" });
      await tabTo("document.activeElement.matches('#signin-form button[type=submit]')", "the sign-in button");
      const ring = await phone.eval("(() => { const s = getComputedStyle(document.activeElement); return s.outlineStyle + ' ' + s.outlineWidth; })()");
      if (/^none|\b0px/.test(ring)) throw new Error("no visible focus: outline " + ring);
      await pressKey("Enter", "Enter", 13, "\r");
      try { await phone.waitFor("!document.getElementById('jobs-view').hidden"); }
      catch (e) { throw new Error("Enter on the sign-in button did not sign in: " + await phone.text("#signin-error") + " / " + await phone.eval("document.getElementById('si-user').value + ' ' + document.getElementById('si-password').value.length")); }
    });
    // every form control has an accessible name; clickable things are buttons or links
    const unnamed = `[...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')].filter((e) =>
      !(e.getAttribute('aria-label') || '').trim() &&
      !(e.getAttribute('aria-labelledby') || '').split(/\\s+/).some((id) => id && document.getElementById(id) && document.getElementById(id).textContent.trim()) &&
      ![...(e.labels || [])].some((l) => l.textContent.trim()) &&
      !(e.tagName === 'BUTTON' && e.textContent.trim()) && !(e.title || '').trim())
      .map((e) => e.outerHTML.slice(0, 100))
      .concat([...document.querySelectorAll('[role=button], a:not([href]), [onclick], div[tabindex]:not([tabindex="-1"]), span[tabindex]')].map((e) => 'not a button: ' + e.outerHTML.slice(0, 100)))`;
    // text whose colour has less than 4.5:1 contrast with the background behind it (WCAG AA)
    const lowContrast = `(() => {
      const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
      const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
        .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
      const bg = (e) => { for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c.length === 3 || c[3] > 0) return c; } return [255, 255, 255]; };
      const out = [];
      for (const e of document.querySelectorAll('body *')) {
        if (!e.offsetParent && e.tagName !== 'BODY') continue;
        if (e.closest(':disabled')) continue;
        if (![...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
        const a = lum(rgb(getComputedStyle(e).color)), b = lum(bg(e));
        const r = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        if (r < 4.5) out.push(e.tagName + ' "' + e.textContent.trim().slice(0, 30) + '": ' + r.toFixed(2));
      }
      return out;
    })()`;
    await step("at 375 px wide (a phone), every page fits without horizontal scrolling, every control has a name, text has contrast", async () => {
      await phone.send("Emulation.setDeviceMetricsOverride", { width: 375, height: 740, deviceScaleFactor: 2, mobile: true });
      const pages = [["#/jobs", `document.querySelector('#jobs-table tbody tr')`],
        ["#/jobs/" + slowJob, `document.getElementById('job-h').textContent.startsWith('Job #${slowJob}') && document.querySelector('#job-body .state')`],
        ["#/submit", "!document.getElementById('submit-view').hidden"],
        ["#/jobs/" + job, `document.getElementById('job-h').textContent.startsWith('Job #${job}') && document.getElementById('export-form')`],
        ["#/exports", `document.querySelector('#exports-table tbody tr')`],
        ["#/exports/" + unknownExport, `document.getElementById('export-h').textContent.startsWith('Export #${unknownExport}') && document.querySelector('#export-body .state')`],
        ["#/admin", "document.querySelector('#grants-table')"]];
      const problems = [];
      for (const [hash, ready] of pages) {
        await phone.eval("location.hash = " + JSON.stringify(hash));
        await phone.waitFor(ready);
        const m = await phone.eval("({ sw: document.documentElement.scrollWidth, bw: document.body.scrollWidth, iw: innerWidth })");
        if (m.iw !== 375) problems.push(hash + ": the layout viewport is " + m.iw + " px, not the device's 375 (viewport meta tag?)");
        if (m.sw > m.iw || m.bw > m.iw) problems.push(hash + ": scrollWidth " + Math.max(m.sw, m.bw) + " > innerWidth " + m.iw);
        const bad = await phone.eval(unnamed);
        if (bad.length) problems.push(hash + ": " + bad.join("; "));
        const hidden = await phone.eval(`[...document.querySelectorAll('section:not([hidden]) .table-wrap td')].filter((td) =>
          getComputedStyle(td).display === 'none' || (td.textContent.trim() && !td.getAttribute('data-label')))
          .map((td) => td.outerHTML.slice(0, 80))`);
        if (hidden.length) problems.push(hash + ": table cells hidden or not labelled with their column: " + hidden.join("; "));
        const faint = await phone.eval(lowContrast);
        if (faint.length) problems.push(hash + ": low contrast: " + faint.slice(0, 5).join("; "));
        if (hash === "#/jobs") await phone.shot("web-phone-jobs");
        /* the tasks of a page are within reach on a phone: each button inside the screen */
        const reach = { ["#/jobs/" + job]: "#members-table td.uri button.copy, #members-table .download, #act-hard-delete",
          ["#/jobs/" + slowJob]: "#act-retry" }[hash];
        if (reach) {
          await phone.waitFor(`document.querySelectorAll(${JSON.stringify(reach)}).length >= ${reach.split(",").length}`, 20);
          const out = await phone.eval(`[...document.querySelectorAll(${JSON.stringify(reach)})].filter((b) => {
            const r = b.getBoundingClientRect(); return !(r.width > 0 && r.left >= 0 && r.right <= innerWidth); })
            .map((b) => b.outerHTML.slice(0, 60))`);
          if (out.length) problems.push(hash + ": out of reach: " + out.join("; "));
          if (hash === "#/jobs/" + job) await phone.shot("web-phone-job");
        }
      }
      if (problems.length) throw new Error(problems.join(" | "));
    });
    await phone.send("Emulation.clearDeviceMetricsOverride").catch(() => {});

    await step("an export is deleted from its page; its keys stay, and the notice goes with the next page", async () => {
      await alice.goto(H + "/#/exports/" + exported);
      await alice.waitFor("document.getElementById('act-xdelete')", 20);
      await alice.click("#act-xdelete");
      await alice.waitFor("location.hash === '#/exports' && document.getElementById('live').textContent.includes('deleted')");
      await alice.waitFor(`!document.getElementById('exports-view').hidden && !document.querySelector('tr[data-export="${exported}"]')`);
      const st = await alice.eval(`fetch('/api/exports/${exported}').then((r) => r.status)`);
      if (st !== 404) throw new Error("the export answers " + st);
      await alice.goto(H + "/#/jobs");
      await alice.waitFor("!document.getElementById('jobs-view').hidden");
      await alice.eval("location.hash = '#/submit'");
      await alice.waitFor("!document.getElementById('submit-view').hidden && document.getElementById('live').textContent === ''");
    });
    await step("hard delete (confirmed) removes the job", async () => {
      await alice.goto(H + "/#/jobs/" + job);
      await alice.waitFor("document.getElementById('job-h').textContent.startsWith('Job #" + job + " ') && document.getElementById('act-hard-delete')");
      await alice.click("#act-hard-delete");
      await alice.waitFor("location.hash === '#/jobs'");
      const r = await alice.eval(`fetch('/api/jobs/${job}').then(r => r.status)`);
      if (r !== 404) throw new Error("status " + r + "; " + await alice.text("#live"));
      await alice.waitFor(`!document.querySelector('tr[data-job="${job}"]')`);
      if (r !== 404) throw new Error("status " + r);
    });
    await step("sign-out returns to the sign-in form and ends the session", async () => {
      await alice.click("#signout");
      await alice.waitFor("!document.getElementById('signin-view').hidden");
      const r = await alice.eval("fetch('/api/jobs').then(r => r.status)");
      if (r !== 401) throw new Error("status " + r);
    });
  } finally {
    try { await cdp.send("Browser.close"); } catch (e) { /* already gone */ }
    const exited = new Promise((r) => { proc.on("exit", r); setTimeout(r, 5000); });
    proc.kill("SIGKILL");
    await exited;
    try { fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5 }); } catch (e) { /* a temporary folder */ }
  }
}

main().then(() => process.exit(failed ? 1 : 0),
  (e) => { notOk("the browser test runs", e.message); process.exit(1); });
