// The test S3 server: @20minutes/s3rver, which checks SigV4 signatures
// (a wrong secret is SignatureDoesNotMatch) and supports UploadPartCopy.
//
//   node --openssl-legacy-provider test/s3/server.js DIR PORT [BUCKET...]
//
// Listens on 127.0.0.1 only, credentials S3RVER/S3RVER, buckets created at
// start.  A second key pair, REMORAKEY with the secret in
// REMORA_TEST_SECRET (if set), lets tests look for a secret that is not
// also the key id.  Prints "ready" when it accepts connections; exits on
// SIGTERM.
'use strict'
// @koa/router, under @20minutes/s3rver, calls Array.prototype.toReversed,
// new in Node.js 20; Debian 12's Node.js is 18, which the quick start
// installs.  Every route of the server failed there (InternalError).
if (!Array.prototype.toReversed) {
  Object.defineProperty(Array.prototype, 'toReversed', {
    value: function toReversed() {
      return Array.prototype.slice.call(this).reverse()
    },
    writable: true,
    configurable: true,
  })
}
const S3rver = require('@20minutes/s3rver')
const { DUMMY_ACCOUNT } = require('@20minutes/s3rver/lib/models/account')

if (process.env.REMORA_TEST_SECRET)
  DUMMY_ACCOUNT.createKeyPair('REMORAKEY', process.env.REMORA_TEST_SECRET)

const [directory, port, ...buckets] = process.argv.slice(2)
const server = new S3rver({
  directory,
  address: '127.0.0.1',
  port: Number(port),
  silent: true,
  vhostBuckets: false,
  configureBuckets: buckets.map((name) => ({ name })),
})
server.run().then(
  () => console.log('ready'),
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
process.on('SIGTERM', () => server.close().then(() => process.exit(0)))
process.on('SIGINT', () => server.close().then(() => process.exit(0)))
