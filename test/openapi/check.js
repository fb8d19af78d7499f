#!/usr/bin/env node
//
// The API's OpenAPI document (web/api/openapi.json, served as
// GET /api/openapi.json) against the OpenAPI 3.1 schema, and answers of
// the API against the document.  With the packages pinned in this folder
// (npm ci): @seriousme/openapi-schema-validator judges the document, Ajv
// (JSON Schema 2020-12, the dialect of OpenAPI 3.1) each answer's body.
//
//   node check.js document DOC
//       DOC is a valid OpenAPI 3.1 document
//   node check.js answers DOC INDEX
//       INDEX holds a line per answer, "FILE STATUS METHOD PATH", with
//       its body in FILE.body and its headers in FILE.headers (curl -D;
//       test/e2e/http.sh writes them); each one must be an
//       answer the document gives: its path one of the document's (or a
//       404 of no path), its method one of the path's (or a 405 naming
//       the path's methods in Allow), its status one of the operation's
//       (the document's own words for 405, 404 and 413 of any route),
//       its body valid against that status's schema
//   node check.js routes DOC ROUTE...
//       every ROUTE ("GET /api/jobs/{id}") is in the document, and every
//       operation of the document is a ROUTE
//
// Prints one line per failure; exits 1 if there was any.
'use strict';

const fs = require('fs');
const path = require('path');

function fail(problems) {
	for (const p of problems)
		console.log(p);
	process.exit(problems.length ? 1 : 0);
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

// [{template, regexp, item}] for the document's paths
function templates(doc) {
	return Object.keys(doc.paths).map((t) => ({
		template: t,
		regexp: new RegExp('^' + t.replace(/[.]/g, '\\.')
			.replace(/\{[^}]+\}/g, '[^/]+') + '$'),
		item: doc.paths[t],
	}));
}

async function checkDocument(file) {
	const { Validator } = require('@seriousme/openapi-schema-validator');
	const v = new Validator();
	const res = await v.validate(path.resolve(file));

	if (!res.valid)
		fail([`${file} is not valid OpenAPI: ${JSON.stringify(res.errors)}`]);
	if (v.version !== '3.1')
		fail([`${file} is OpenAPI ${v.version}, not 3.1`]);
}

// the schema of a response object (following a $ref to components)
function responseOf(doc, r) {
	if (r && r.$ref)
		return doc.components.responses[r.$ref.split('/').pop()];
	return r;
}

// an answer of the index: {method, path, status, type, allow, body}
function answer(line) {
	const [file, status, method, ...p] = line.split(' ');
	// the last header block (a 100 Continue may come before it)
	const blocks = fs.readFileSync(file + '.headers', 'latin1').split(/\r?\n\r?\n/)
		.filter((b) => b.trim());
	const headers = {};

	for (const h of (blocks.pop() || '').split(/\r?\n/).slice(1)) {
		const i = h.indexOf(':');

		if (i > 0)
			headers[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim();
	}
	return {
		method, path: p.join(' '), status: Number(status),
		type: headers['content-type'], allow: headers.allow,
		body: fs.readFileSync(file + '.body', 'utf8'),
	};
}

function checkAnswers(file, log) {
	const Ajv = require('ajv/dist/2020');
	const addFormats = require('ajv-formats');
	const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
	const ajv = new Ajv({ strict: false, allErrors: true });
	const paths = templates(doc);
	const problems = [];
	const seen = new Set();
	let n = 0;

	addFormats(ajv);
	ajv.addSchema(doc, 'openapi.json');

	// the body's schema at a JSON pointer of the document
	function validate(pointer, body, what) {
		const fn = ajv.getSchema('openapi.json#' + pointer);
		let value;

		if (fn === undefined) {
			problems.push(`${what}: no schema at ${pointer}`);
			return;
		}
		try {
			value = JSON.parse(body);
		} catch (e) {
			problems.push(`${what}: the body is not JSON: ${body.slice(0, 200)}`);
			return;
		}
		if (!fn(value))
			problems.push(`${what}: ${ajv.errorsText(fn.errors)}; body ${body.slice(0, 300)}`);
	}
	const esc = (s) => s.replace(/~/g, '~0').replace(/\//g, '~1')
		.replace(/[{}]/g, encodeURIComponent);

	for (const line of fs.readFileSync(log, 'utf8').split('\n')) {
		if (!line)
			continue;
		const a = answer(line);
		const route = a.path.split('?')[0];
		const what = `${a.method} ${a.path} ${a.status}`;
		const found = paths.find((p) => p.regexp.test(route));
		const method = a.method.toLowerCase();
		let op, r, key;

		n++;
		if (!route.startsWith('/api/'))
			continue;
		if (!found) {
			if (a.status !== 404)
				problems.push(`${what}: the path is not in the document`);
			else
				validate('/components/schemas/Error', a.body, what);
			continue;
		}
		op = found.item[method === 'head' ? 'get' : method];
		if (!op) {
			const allowed = METHODS.filter((m) => found.item[m])
				.map((m) => m.toUpperCase()).sort().join(', ');
			const allow = (a.allow || '').split(/,\s*/).sort().join(', ');

			if (a.status !== 405)
				problems.push(`${what}: ${a.method} is not an operation of ${found.template}`);
			else if (allow !== allowed)
				problems.push(`${what}: Allow is "${a.allow}", the document has ${allowed}`);
			else
				validate('/components/schemas/Error', a.body, what);
			continue;
		}
		seen.add(`${method} ${found.template} ${a.status}`);
		key = String(a.status);
		if (op.responses[key] === undefined && (key === '405' || key === '413'))
			r = responseOf(doc, { $ref: key === '405' ? 'MethodNotAllowed' : 'PayloadTooLarge' });
		else if (op.responses[key] === undefined) {
			problems.push(`${what}: the document gives ${found.template} no ${key} for ${a.method}`);
			continue;
		} else
			r = responseOf(doc, op.responses[key]);
		if (!r.content) {
			if (a.body !== '' && method !== 'head')
				problems.push(`${what}: a body where the document has none`);
			continue;
		}
		if (method === 'head' || !r.content['application/json'])
			continue;
		if (!(a.type || '').startsWith('application/json'))
			problems.push(`${what}: Content-Type ${a.type}, not application/json`);
		else if (op.responses[key] && op.responses[key].$ref)
			validate('/components/responses/' + op.responses[key].$ref.split('/').pop() +
				'/content/application~1json/schema', a.body, what);
		else if (op.responses[key])
			validate(`/paths/${esc(found.template)}/${method}/responses/${key}` +
				'/content/application~1json/schema', a.body, what);
		else
			validate('/components/schemas/Error', a.body, what);
	}
	if (n === 0)
		problems.push(`${log} holds no answers`);
	console.log(`# ${n} answers, ${seen.size} distinct (operation, status) pairs`);
	fail(problems);
}

function checkRoutes(file, routes) {
	const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
	const inDoc = new Set();
	const problems = [];

	for (const [t, item] of Object.entries(doc.paths))
		for (const m of METHODS)
			if (item[m])
				inDoc.add(`${m.toUpperCase()} ${t}`);
	for (const r of new Set(routes))
		if (!inDoc.delete(r))
			problems.push(`the route ${r} is not in ${file}`);
	for (const r of inDoc)
		problems.push(`${file} has ${r}, which the server does not route`);
	fail(problems);
}

const [mode, file, ...rest] = process.argv.slice(2);
if (mode === 'document')
	checkDocument(file).then(() => fail([]));
else if (mode === 'answers')
	checkAnswers(file, rest[0]);
else if (mode === 'routes')
	checkRoutes(file, rest);
else
	fail(['usage: check.js document DOC | answers DOC LOG | routes DOC ROUTE...']);
