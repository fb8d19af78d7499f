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
const crypto = require('node:crypto')
const fs = require('node:fs/promises')
const path = require('node:path')
const S3rver = require('@20minutes/s3rver')
const { DUMMY_ACCOUNT } = require('@20minutes/s3rver/lib/models/account')
const FilesystemStore = require('@20minutes/s3rver/lib/stores/filesystem')
const S3Object = require('@20minutes/s3rver/lib/models/object')
const { ensureDir } = require('@20minutes/s3rver/lib/utils')

// An object is replaced whole or not at all, as on S3.  The server writes
// an object's (or a part's) file in place and copies onto it in place, so
// an upload cut short, or one it acts on after libcurl has sent the request
// again whole, left the key with other bytes under the complete object's
// ETag, and a read or a HEAD during a write saw part of an object (or an
// empty ETag).  Each write of an object's bytes, ETag or metadata goes to a
// file of its own beside it, renamed over it once complete: a name not
// ending in ._S3rver_object, which no listing shows.
let writes = 0
const scratch = (file) => `${file}.${process.pid}.${++writes}.partial`

async function replaceWhole(file, write) {
  const tmp = scratch(file)
  try {
    const result = await write(tmp)
    await fs.rename(tmp, file)
    return result
  } catch (err) {
    await fs.rm(tmp, { force: true })
    throw err
  }
}

const putContent = FilesystemStore.prototype.putContent
FilesystemStore.prototype.putContent = function (file, content) {
  if (!Buffer.isBuffer(content))
    return replaceWhole(file, (tmp) => putContent.call(this, tmp, content))
  // (the server's own Buffer path answers before the bytes are written)
  return replaceWhole(file, async (tmp) => {
    await fs.writeFile(tmp, content)
    return [content.length, crypto.createHash('md5').update(content).digest('hex')]
  })
}

// The server's own putMetadata, each file replaced whole
FilesystemStore.prototype.putMetadata = async function (bucket, key, metadata, md5) {
  const json = {}

  for (const [k, v] of Object.entries(metadata))
    if (S3Object.ALLOWED_METADATA.includes(k) || k.startsWith('x-amz-meta-')) json[k] = v
  if (md5)
    await replaceWhole(this.getResourcePath(bucket, key, 'object.md5'), (tmp) =>
      fs.writeFile(tmp, md5),
    )
  await replaceWhole(this.getResourcePath(bucket, key, 'metadata.json'), (tmp) =>
    fs.writeFile(tmp, JSON.stringify(json, null, 2)),
  )
}

// The server's own copyObject, each file replaced whole
FilesystemStore.prototype.copyObject = async function (srcBucket, srcKey, destBucket, destKey, meta) {
  const src = (r) => this.getResourcePath(srcBucket, srcKey, r)
  const dest = (r) => this.getResourcePath(destBucket, destKey, r)

  if (src('object') !== dest('object')) {
    await ensureDir(path.dirname(dest('object')))
    await replaceWhole(dest('object'), (tmp) => fs.copyFile(src('object'), tmp))
    if (!meta)
      await Promise.all(
        ['metadata.json', 'object.md5'].map((r) =>
          replaceWhole(dest(r), (tmp) => fs.copyFile(src(r), tmp)),
        ),
      )
  }
  if (meta) await this.putMetadata(destBucket, destKey, meta)
  return this.getMetadata(destBucket, destKey)
}

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
