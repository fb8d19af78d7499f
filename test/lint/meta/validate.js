// node validate.js SCHEMA FILE...: each FILE against the JSON Schema
// SCHEMA (draft 2020-12, formats checked); prints "valid" or the errors
// of each, exits 1 if one is invalid.
'use strict'
const fs = require('fs')
const Ajv2020 = require('ajv/dist/2020')
const addFormats = require('ajv-formats')

const [schemaFile, ...files] = process.argv.slice(2)
const ajv = new Ajv2020({ allErrors: true, strict: true })
addFormats(ajv)
const validate = ajv.compile(JSON.parse(fs.readFileSync(schemaFile, 'utf8')))
let bad = 0
for (const f of files) {
  let doc
  try {
    doc = JSON.parse(fs.readFileSync(f, 'utf8'))
  } catch (e) {
    console.log(`${f}: not JSON: ${e.message}`)
    bad++
    continue
  }
  if (validate(doc)) {
    console.log(`${f}: valid`)
  } else {
    bad++
    for (const e of validate.errors)
      console.log(`${f}: ${e.instancePath || '/'} ${e.message}`)
  }
}
process.exit(bad ? 1 : 0)
