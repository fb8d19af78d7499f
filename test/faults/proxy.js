// The fault-injecting proxy: forwards every request to an upstream on
// 127.0.0.1 (nginx for sources, the S3 server for the target) unchanged —
// Host header included, so SigV4 signatures stay valid — unless a rule
// matches it.
//
//   node test/faults/proxy.js PORT UPSTREAM_PORT
//
// Rules are added through the control path (never forwarded):
//   GET /__rule?match=SUBSTR&action=ACTION[&count=N][&skip=N][&after=BYTES][&method=M]
//   GET /__release       release every held request
//   GET /__reset         forget all rules
//   GET /__hits?match=SUBSTR   how many requests matched so far
//   GET /__bytes?match=SUBSTR  the bytes of the upstream's answer bodies
//                        to them (the rule's own answers not counted)
//   GET /__fired         how often each action was applied, as JSON
//   GET /__firedlog      the last 1,000 applied, as JSON lines: when
//                        (seconds since the epoch), action, "METHOD path"
// A rule applies to the first `count` requests (default: all) whose
// "METHOD path" contains SUBSTR (and whose method is M, if given), after
// the first `skip` of them (default 0), which are forwarded:
//   status:NNN  answer NNN (with Retry-After: 1 for 429/503)
//   s3error:CODE:NNN  answer NNN with an S3 <Error> document of that code
//   reset       send the headers and `after` bytes of the body, then
//               destroy the connection (a reset mid-transfer)
//   truncate    like reset, but close cleanly (a short body)
//   stall       send the headers and `after` bytes, then nothing, forever
//               (the connection stays open until the client gives up)
//               For these three the upstream has acted on the request, and
//               the fault always bites: an answer of at most `after` bytes
//               is cut one byte short of its Content-Length, and one
//               without a body (Content-Length 0, HEAD) loses its headers
//               too (nothing of the answer is sent).
//   cutrequest  forward the headers and `after` bytes of the request body
//               (one byte short of its Content-Length at most), then close
//               both connections: the upstream sees an upload cut short,
//               the client no answer
//   hold        do not forward until /__release
//   holdcut     hold, then on /__release forward as cutrequest does: an
//               upload its sender gave up on, reaching the store late and
//               cut short
//   holdanswer  forward, and hold the upstream's answer until /__release
//               (the store did what was asked; nobody is told)
//   slow        forward at 256 KiB/s
//   drop:HEADER forward without that request header (e.g. drop:if-range:
//               a server that ignores If-Range)
//   bigheader   answer 200 with a 256 KiB response header
//   s3body:NAME:NNN  answer NNN with a hostile XML body: bomb (nested
//               entities), xxe (an external entity), deep (deep nesting);
//               or partlimit, the InvalidArgument naming partNumber that
//               Swift's S3 API answers to a part past its limit
//   redirect:URL  answer 302 with Location: URL (the rest of the action)
//   badetag     forward, with an ETag whose bytes are not UTF-8 and hold a
//               control character (a tab)
// Listens on 127.0.0.1 only.  Idle client connections are closed after 1 s,
// or KEEPALIVE_MS from the environment.
'use strict'
const http = require('node:http')

const port = Number(process.argv[2])
const upstreamPort = Number(process.argv[3])
let rules = []
let held = []
const hits = new Map()
const bytes = new Map()
const fired = {}
const firedLog = []

function control(req, res) {
  const url = new URL(req.url, 'http://x')
  const q = url.searchParams
  if (url.pathname === '/__rule') {
    rules.push({
      match: q.get('match') || '',
      method: q.get('method'),
      action: q.get('action'),
      count: q.has('count') ? Number(q.get('count')) : Infinity,
      skip: Number(q.get('skip') || 0),
      after: Number(q.get('after') || 0),
    })
  } else if (url.pathname === '/__release') {
    const h = held
    held = []
    h.forEach((fn) => fn())
  } else if (url.pathname === '/__reset') {
    rules = []
  } else if (url.pathname === '/__fired') {
    res.end(JSON.stringify(fired))
    return
  } else if (url.pathname === '/__firedlog') {
    res.end(firedLog.map((e) => JSON.stringify(e) + '\n').join(''))
    return
  } else if (url.pathname === '/__hits') {
    res.end(String(hits.get(q.get('match')) || 0))
    return
  } else if (url.pathname === '/__bytes') {
    res.end(String(bytes.get(q.get('match')) || 0))
    return
  }
  res.end('ok\n')
}

// at most `after` bytes of a body of `length` (a header's value): one byte
// short of a known length, so that a cut always cuts
function cutPoint(after, length) {
  const n = Number(length)
  return Number.isFinite(n) && n > 0 ? Math.min(after, n - 1) : after
}

function forward(req, res, opts = {}) {
  const headers = { ...req.headers }
  if (opts.drop) delete headers[opts.drop]
  const up = http.request(
    {
      host: '127.0.0.1',
      port: upstreamPort,
      method: req.method,
      path: req.url,
      headers,
    },
    (ur) => {
      // counted as it is read from the upstream, whatever reaches the client
      const count = () =>
        ur.on('data', (chunk) => {
          for (const m of req.matched || []) bytes.set(m, (bytes.get(m) || 0) + chunk.length)
        })
      // an answer to a request cut short goes nowhere
      if (opts.cutRequest !== undefined) return ur.resume()
      if (opts.holdAnswer) {
        // not read meanwhile: the answer waits in the upstream socket
        held.push(() => {
          res.writeHead(ur.statusCode, ur.headers)
          count()
          ur.pipe(res)
        })
        return
      }
      // a header string goes out as latin1: \u00ff is the byte 0xff
      if (opts.etag) ur.headers.etag = opts.etag
      res.writeHead(ur.statusCode, ur.headers)
      count()
      if (opts.cutAfter === undefined && !opts.slow) {
        ur.pipe(res)
        return
      }
      // no body to send (HEAD): the cut comes before the headers
      const cut = req.method === 'HEAD' ? 0 : cutPoint(opts.cutAfter, ur.headers['content-length'])
      let sent = 0
      let cutDone = false
      const doCut = () => {
        if (cutDone) return
        cutDone = true
        ur.destroy()
        if (opts.mode === 'reset') res.socket.destroy()
        else if (opts.mode === 'truncate') res.socket.end()
        // stall: keep the connection open and send nothing more
      }
      ur.on('data', (chunk) => {
        if (opts.cutAfter !== undefined) {
          if (cutDone) return
          const room = cut - sent
          if (room > 0) res.write(chunk.subarray(0, Math.min(room, chunk.length)))
          sent += chunk.length
          if (sent >= cut) doCut()
        } else {
          ur.pause()
          res.write(chunk)
          setTimeout(() => ur.resume(), (chunk.length / (256 * 1024)) * 1000)
        }
      })
      // an answer that ended before the cut (no body, or a chunked one
      // shorter than `after`) is cut at its end
      ur.on('end', () => (opts.cutAfter !== undefined ? doCut() : res.end()))
    },
  )
  up.on('error', () => res.destroy())
  if (opts.cutRequest === undefined) {
    req.pipe(up)
    return
  }
  // the request body cut short: `cut` bytes reach the upstream, then both
  // connections close (the upstream's once those bytes are written)
  const cut = cutPoint(opts.cutRequest, req.headers['content-length'])
  let sent = 0
  let cutDone = false
  const doCut = (last) => {
    if (cutDone) return
    cutDone = true
    req.pause()
    res.socket.destroy()
    if (last && last.length > 0) up.write(last, () => up.destroy())
    else {
      up.flushHeaders()
      setTimeout(() => up.destroy(), 50)
    }
  }
  if (cut <= 0) return doCut()
  req.on('data', (chunk) => {
    if (cutDone) return
    const piece = chunk.subarray(0, Math.min(cut - sent, chunk.length))
    sent += chunk.length
    if (sent >= cut) doCut(piece)
    else up.write(piece)
  })
  req.on('end', () => doCut())
}

const server = http.createServer((req, res) => {
  if (req.url.startsWith('/__')) return control(req, res)
  const line = `${req.method} ${req.url}`
  const rule = rules.find(
    (r) => r.count > 0 && line.includes(r.match) && (!r.method || r.method === req.method),
  )
  req.matched = []
  for (const r of rules)
    if (line.includes(r.match) && (!r.method || r.method === req.method)) {
      hits.set(r.match, (hits.get(r.match) || 0) + 1)
      req.matched.push(r.match)
    }
  if (!rule) return forward(req, res)
  if (rule.skip > 0) {
    rule.skip--
    return forward(req, res)
  }
  rule.count--
  const [action, arg] = rule.action.split(':')
  fired[action] = (fired[action] || 0) + 1
  // what a failed check's diagnostics name: which fault hit which request when
  firedLog.push({ at: Date.now() / 1000, action: rule.action, request: line.slice(0, 160) })
  if (firedLog.length > 1000) firedLog.shift()
  switch (action) {
    case 'status': {
      const code = Number(arg)
      const headers = { 'Content-Type': 'text/plain' }
      if (code === 429 || code === 503) headers['Retry-After'] = '1'
      req.resume()
      res.writeHead(code, headers)
      res.end(`injected ${code}\n`)
      return
    }
    case 's3error': {
      const [, code, status] = rule.action.split(':')
      req.resume()
      res.writeHead(Number(status || 503), { 'Content-Type': 'application/xml' })
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code>` +
          `<Message>injected ${code}</Message><RequestId>fault</RequestId></Error>`,
      )
      return
    }
    case 'reset':
    case 'truncate':
    case 'stall':
      return forward(req, res, { cutAfter: rule.after, mode: action })
    case 'cutrequest':
      return forward(req, res, { cutRequest: rule.after })
    case 'hold':
      held.push(() => forward(req, res))
      return
    case 'holdcut':
      held.push(() => forward(req, res, { cutRequest: rule.after }))
      return
    case 'holdanswer':
      return forward(req, res, { holdAnswer: true })
    case 'slow':
      return forward(req, res, { slow: true })
    case 'drop':
      return forward(req, res, { drop: arg.toLowerCase() })
    case 'badetag':
      return forward(req, res, { etag: '"\u00ff\u00fe\t[31m"' })
    case 'redirect':
      req.resume()
      res.writeHead(302, { Location: rule.action.slice('redirect:'.length), 'Content-Length': '0' })
      res.end()
      return
    case 'bigheader':
      req.resume()
      res.writeHead(200, { 'X-Padding': 'x'.repeat(256 * 1024), 'Content-Length': '2' })
      res.end('ok')
      return
    case 's3body': {
      const [, name, status] = rule.action.split(':')
      const bodies = {
        bomb:
          '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">' +
          '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">' +
          '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">' +
          '<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]>' +
          '<InitiateMultipartUploadResult><UploadId>&lol4;</UploadId></InitiateMultipartUploadResult>',
        xxe:
          '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>' +
          '<Error><Code>&x;</Code><Message>&x;</Message></Error>',
        deep: '<Error>' + '<a>'.repeat(100000) + '</Error>',
        partlimit:
          '<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidArgument</Code>' +
          '<Message>Part number must be an integer between 1 and 1000, inclusive</Message>' +
          '<ArgumentName>partNumber</ArgumentName><ArgumentValue>' +
          (new URL(req.url, 'http://x').searchParams.get('partNumber') || '') +
          '</ArgumentValue><RequestId>fault</RequestId></Error>',
      }
      req.resume()
      res.writeHead(Number(status || 200), { 'Content-Type': 'application/xml' })
      res.end(bodies[name] || '')
      return
    }
    default:
      res.writeHead(500)
      res.end('unknown action\n')
  }
})
server.keepAliveTimeout = Number(process.env.KEEPALIVE_MS || 1000)
server.listen(port, '127.0.0.1', () => console.log('ready'))
process.on('SIGTERM', () => process.exit(0))
