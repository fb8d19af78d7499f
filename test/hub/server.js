// A local Hugging Face Hub for the tests, following the public Hub API's
// shape: revision resolution, the recursive tree listing paginated with
// Link: rel="next", resolve URLs that serve small files directly and
// redirect LFS files to a second host (a "CDN" on another port), gated
// repositories that need a token, and faults on demand.
//
//   node server.js HUB_PORT CDN_PORT ROOT TOKEN
//
// ROOT/{models,datasets}/OWNER/NAME/ holds a repository's files.  Files of
// LFS_MIN bytes or more are LFS files.  In a repository directory:
//   .gated        the repository needs "Authorization: Bearer TOKEN"
//   .extra.json   extra tree entries appended to the listing (hostile names)
//   .lie          paths whose listed lfs.oid is wrong (a checksum mismatch)
//   .commit       part of main's commit id: another content, another commit
// Control (both ports): /__rule?match=S&status=N&count=K&retry_after=S
// answers N to the next K requests whose URL contains S; /__rate?bps=N
// throttles file bodies; /__hits?match=S counts requests; /__cdn_auth
// counts CDN requests that carried an Authorization header.
'use strict';
const http = require('http');
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const [hubPort, cdnPort, root, token] = process.argv.slice(2);
const LFS_MIN = 1024 * 1024;
const PAGE = 3;
const rules = [];
const log = [];
let cdnAuth = 0;
let rate = 0;

const sha1 = (s) => crypto.createHash('sha1').update(s).digest('hex');
// main's commit; a repository's .commit is part of it (write another for a
// new commit: only main and the newest commit resolve)
const commitOf = (type, repo) => {
  const f = path.join(root, type, repo, '.commit');
  return sha1(`${type}/${repo}@main` + (fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : ''));
};

function walk(dir, rel, out) {
  for (const name of fs.readdirSync(dir).sort()) {
    if (name.startsWith('.')) continue;
    const full = path.join(dir, name);
    const r = rel ? `${rel}/${name}` : name;
    if (fs.statSync(full).isDirectory()) {
      out.push({ type: 'directory', path: r, oid: sha1(r), size: 0 });
      walk(full, r, out);
    } else out.push({ type: 'file', path: r, full });
  }
  return out;
}

// by path, size and time: a file written again is read again
const cache = new Map();
function fileInfo(full) {
  const st = fs.statSync(full);
  const key = `${full}:${st.size}:${st.mtimeMs}`;
  let v = cache.get(key);
  if (!v) {
    const data = fs.readFileSync(full);
    v = {
      size: data.length,
      sha256: crypto.createHash('sha256').update(data).digest('hex'),
      blob: sha1(`blob ${data.length}\0` + data.toString('binary')),
    };
    cache.set(key, v);
  }
  return v;
}

function repoDir(type, repo) {
  if (!/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(repo)) return null;
  const d = path.join(root, type, repo);
  return fs.existsSync(d) ? d : null;
}

function listing(type, repo, dir) {
  const lies = fs.existsSync(path.join(dir, '.lie'))
    ? fs.readFileSync(path.join(dir, '.lie'), 'utf8').split('\n').filter(Boolean)
    : [];
  const entries = walk(dir, '', []).map((e) => {
    if (e.type !== 'file') return e;
    const i = fileInfo(e.full);
    const o = { type: 'file', path: e.path, oid: i.blob, size: i.size };
    if (i.size >= LFS_MIN)
      o.lfs = {
        oid: lies.includes(e.path) ? '0'.repeat(64) : i.sha256,
        size: i.size,
        pointerSize: 134,
      };
    return o;
  });
  const extra = path.join(dir, '.extra.json');
  if (fs.existsSync(extra)) entries.push(...JSON.parse(fs.readFileSync(extra)));
  return entries;
}

function send(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

function throttled(res, data, headers) {
  res.writeHead(200, headers);
  if (!rate) return res.end(data);
  let off = 0;
  const chunk = Math.max(1, Math.floor(rate / 10));
  const t = setInterval(() => {
    if (res.destroyed) return clearInterval(t);
    res.write(data.subarray(off, off + chunk));
    off += chunk;
    if (off >= data.length) {
      clearInterval(t);
      res.end();
    }
  }, 100);
}

function control(u, res) {
  const q = u.searchParams;
  if (u.pathname === '/__rule') {
    rules.push({
      match: q.get('match'),
      status: +q.get('status'),
      count: +(q.get('count') || 1),
      retryAfter: q.get('retry_after'),
    });
    return send(res, 200, 'ok');
  }
  if (u.pathname === '/__rate') {
    rate = +q.get('bps');
    return send(res, 200, 'ok');
  }
  if (u.pathname === '/__hits')
    return send(res, 200, String(log.filter((l) => l.includes(q.get('match'))).length));
  if (u.pathname === '/__cdn_auth') return send(res, 200, String(cdnAuth));
  return false;
}

function fault(url, res) {
  const r = rules.find((x) => x.count > 0 && url.includes(x.match));
  if (!r) return false;
  r.count--;
  send(res, r.status, { error: 'injected' }, r.retryAfter ? { 'Retry-After': r.retryAfter } : {});
  return true;
}

function authorized(req, dir) {
  if (!fs.existsSync(path.join(dir, '.gated'))) return true;
  return req.headers.authorization === `Bearer ${token}`;
}

function hub(req, res) {
  const u = new URL(req.url, `http://127.0.0.1:${hubPort}`);
  if (u.pathname.startsWith('/__')) return control(u, res);
  log.push(`hub ${req.url}`);
  if (fault(req.url, res)) return;
  let m;
  if ((m = u.pathname.match(/^\/api\/(models|datasets)\/([^/]+\/[^/]+)\/revision\/([^/]+)$/))) {
    const type = m[1], repo = m[2], rev = decodeURIComponent(m[3]);
    const dir = repoDir(type, repo);
    if (!dir) return send(res, 404, { error: 'Repository not found' });
    if (!authorized(req, dir)) return send(res, 401, { error: 'Access to this repository is restricted' });
    const sha = commitOf(type, repo);
    if (rev !== 'main' && rev !== 'v1.0' && rev !== sha)
      return send(res, 404, { error: `Invalid rev id: ${rev}` });
    return send(res, 200, { id: repo, sha, private: false });
  }
  if ((m = u.pathname.match(/^\/api\/(models|datasets)\/([^/]+\/[^/]+)\/tree\/([0-9a-f]{40})$/))) {
    const type = m[1], repo = m[2];
    const dir = repoDir(type, repo);
    if (!dir || m[3] !== commitOf(type, repo)) return send(res, 404, { error: 'not found' });
    if (!authorized(req, dir)) return send(res, 401, { error: 'restricted' });
    const all = listing(type, repo, dir);
    const cursor = +(u.searchParams.get('cursor') || 0);
    const page = all.slice(cursor, cursor + PAGE);
    const headers = {};
    if (cursor + PAGE < all.length)
      headers.Link = `<http://127.0.0.1:${hubPort}${u.pathname}?recursive=true&cursor=${cursor + PAGE}>; rel="next"`;
    return send(res, 200, page, headers);
  }
  if ((m = u.pathname.match(/^\/(datasets\/)?([^/]+\/[^/]+)\/resolve\/([0-9a-f]{40})\/(.+)$/))) {
    const type = m[1] ? 'datasets' : 'models', repo = m[2];
    const dir = repoDir(type, repo);
    const rel = decodeURIComponent(m[4]);
    if (!dir || m[3] !== commitOf(type, repo)) return send(res, 404, { error: 'not found' });
    if (!authorized(req, dir)) return send(res, 401, { error: 'restricted' });
    const full = path.join(dir, rel);
    if (!full.startsWith(dir + path.sep) || !fs.existsSync(full)) return send(res, 404, { error: 'Entry not found' });
    const i = fileInfo(full);
    const common = { 'X-Repo-Commit': m[3], ETag: `"${i.blob}"` };
    if (i.size >= LFS_MIN) {
      res.writeHead(302, {
        ...common,
        Location: `http://127.0.0.1:${cdnPort}/cdn/${type}/${repo}/${encodeURIComponent(rel)}?sig=x`,
        'X-Linked-Etag': `"${i.sha256}"`,
        'X-Linked-Size': String(i.size),
      });
      return res.end();
    }
    return throttled(res, fs.readFileSync(full), { ...common, 'Content-Length': i.size });
  }
  send(res, 404, { error: 'no such route' });
}

function cdn(req, res) {
  const u = new URL(req.url, `http://127.0.0.1:${cdnPort}`);
  if (u.pathname.startsWith('/__')) return control(u, res);
  log.push(`cdn ${req.url}`);
  if (req.headers.authorization) cdnAuth++;
  if (fault(req.url, res)) return;
  const m = u.pathname.match(/^\/cdn\/(models|datasets)\/([^/]+\/[^/]+)\/(.+)$/);
  const dir = m && repoDir(m[1], m[2]);
  const full = dir && path.join(dir, decodeURIComponent(m[3]));
  if (!full || !full.startsWith(dir + path.sep) || !fs.existsSync(full)) return send(res, 404, { error: 'nope' });
  const i = fileInfo(full);
  const data = fs.readFileSync(full);
  const range = req.headers.range && req.headers.range.match(/^bytes=(\d+)-$/);
  if (range && +range[1] < data.length) {
    const start = +range[1];
    res.writeHead(206, {
      'Content-Range': `bytes ${start}-${data.length - 1}/${data.length}`,
      'Content-Length': data.length - start,
      ETag: `"${i.sha256}"`,
    });
    return res.end(data.subarray(start));
  }
  throttled(res, data, { 'Content-Length': i.size, ETag: `"${i.sha256}"` });
}

http.createServer(hub).listen(+hubPort, '127.0.0.1');
http.createServer(cdn).listen(+cdnPort, '127.0.0.1');
