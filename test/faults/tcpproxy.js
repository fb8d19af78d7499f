// A TCP proxy that can cut connections: between a client (remora-worker,
// psql) and PostgreSQL, or any other TCP server on 127.0.0.1.  Bytes are
// relayed unchanged in both directions until the control endpoint says
// otherwise.
//
//   node test/faults/tcpproxy.js PORT UPSTREAM_PORT CONTROL_PORT
//
// Control (HTTP on 127.0.0.1:CONTROL_PORT, GET; each answers "ok" or a
// number):
//   /drop       destroy every current connection (both sides reset): a
//               connection cut mid-round
//   /refuse     from now on, new connections are reset as soon as they are
//               accepted (current ones are left alone; /drop them too)
//   /blackhole  relay nothing, in either direction, on current and new
//               connections, without closing them: a partition in which
//               packets are lost and nobody hears of it
//   /allow      let everything through again (connections held by
//               /blackhole resume: what was read meanwhile is sent on)
//   /upstream?port=N  new connections go to port N (a moved address)
//   /connections      how many connections are open now
//   /accepted         how many connections were accepted so far
// Listens on 127.0.0.1 only.
'use strict'
const net = require('node:net')
const http = require('node:http')

const port = Number(process.argv[2])
let upstreamPort = Number(process.argv[3])
const controlPort = Number(process.argv[4])
let mode = 'allow' // allow | refuse | blackhole
let accepted = 0
const open = new Set()

function relay(from, to, conn) {
  from.on('data', (chunk) => {
    if (mode === 'blackhole') {
      conn.held.push([to, chunk])
      return
    }
    if (!to.write(chunk)) {
      from.pause()
      to.once('drain', () => from.resume())
    }
  })
}

function close(conn) {
  if (!open.delete(conn)) return
  conn.client.destroy()
  conn.server.destroy()
}

const proxy = net.createServer((client) => {
  accepted++
  if (mode === 'refuse') {
    client.resetAndDestroy()
    return
  }
  const server = net.connect({ host: '127.0.0.1', port: upstreamPort })
  const conn = { client, server, held: [] }
  open.add(conn)
  client.setNoDelay(true)
  server.setNoDelay(true)
  relay(client, server, conn)
  relay(server, client, conn)
  for (const s of [client, server]) {
    s.on('error', () => close(conn))
    s.on('close', () => close(conn))
  }
})

function control(req, res) {
  const url = new URL(req.url, 'http://x')
  switch (url.pathname) {
    case '/drop':
      for (const conn of [...open]) {
        open.delete(conn)
        conn.client.resetAndDestroy()
        conn.server.resetAndDestroy()
      }
      break
    case '/refuse':
    case '/blackhole':
      mode = url.pathname.slice(1)
      break
    case '/allow':
      mode = 'allow'
      for (const conn of open) {
        const held = conn.held
        conn.held = []
        for (const [to, chunk] of held) to.write(chunk)
      }
      break
    case '/upstream':
      upstreamPort = Number(url.searchParams.get('port'))
      break
    case '/connections':
      res.end(String(open.size))
      return
    case '/accepted':
      res.end(String(accepted))
      return
    default:
      res.writeHead(404)
      res.end('unknown\n')
      return
  }
  res.end('ok\n')
}

proxy.listen(port, '127.0.0.1', () => {
  http.createServer(control).listen(controlPort, '127.0.0.1', () => console.log('ready'))
})
process.on('SIGTERM', () => process.exit(0))
