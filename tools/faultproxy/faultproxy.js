#!/usr/bin/env node
'use strict';
/*
 * faultproxy: an HTTP/1.1 proxy between an S3 client and a test server that injects
 * faults (latency, 5xx/SlowDown, resets, truncated bodies, silently shortened
 * PUTs) and emulates an AIStore gateway/target pair (307 redirects, one-page
 * listings). Node built-ins only. See tools/faultproxy/README.md.
 *
 *   node tools/faultproxy/faultproxy.js --upstream http://127.0.0.1:PORT \
 *       --listen 127.0.0.1:0 --control 127.0.0.1:0 --port-file F
 *
 * Listeners (each 127.0.0.1:0 unless given):
 *   front    --listen    plain proxy: request forwarded unchanged (Host too)
 *   gateway  --gateway   AIStore gateway, endpoint http://HOST:PORT/s3
 *   target   --target    AIStore target, reached by the gateway's 307s
 *   control  --control   JSON API: GET/PUT /config, GET /stats, POST /reset
 */

const fs = require('fs');
const http = require('http');
const crypto = require('crypto');
const { URL } = require('url');
const { signRequest } = require('./sigv4');

const MiB = 1024 * 1024;
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
]);

// ---------------------------------------------------------------------------
// command line

function parseArgs(argv) {
  const opts = {
    upstream: null,
    listen: '127.0.0.1:0',
    control: '127.0.0.1:0',
    gateway: '127.0.0.1:0',
    target: '127.0.0.1:0',
    portFile: null,
    accessKey: 'S3RVER',
    secretKey: 'S3RVER',
    region: 'us-east-1',
    config: null,
    hopRedirects: false,
  };
  const names = {
    '--upstream': 'upstream',
    '--listen': 'listen',
    '--control': 'control',
    '--gateway': 'gateway',
    '--target': 'target',
    '--port-file': 'portFile',
    '--access-key': 'accessKey',
    '--secret-key': 'secretKey',
    '--region': 'region',
    '--config': 'config',
  };
  for (let i = 2; i < argv.length; i++) {
    if (argv[i] === '--hop-redirects') {
      opts.hopRedirects = true; // as config hop_redirects, whatever a reset does
      continue;
    }
    const name = names[argv[i]];
    if (!name || i + 1 >= argv.length) {
      if (argv[i] === '-h' || argv[i] === '--help') {
        process.stdout.write(
          'usage: faultproxy.js --upstream URL [--listen H:P] [--control H:P]\n' +
            '       [--gateway H:P] [--target H:P] [--port-file F]\n' +
            '       [--access-key K] [--secret-key S] [--region R] [--config JSON]\n' +
            '       [--hop-redirects]\n',
        );
        process.exit(0);
      }
      throw new Error(`bad argument ${argv[i]} (try --help)`);
    }
    opts[name] = argv[++i];
  }
  if (!opts.upstream) throw new Error('--upstream is required');
  return opts;
}

function splitHostPort(spec) {
  const idx = spec.lastIndexOf(':');
  return { host: spec.slice(0, idx) || '127.0.0.1', port: Number(spec.slice(idx + 1)) };
}

// ---------------------------------------------------------------------------
// configuration and counters

const MODES = ['latency', 'errors', 'reset', 'truncate', 'short_put'];

function defaultConfig() {
  return {
    seed: 1,
    latency: null, // { first_byte_ms, per_mib_ms, ...filters }
    errors: null, // { status, code, rate | nth [count], ...filters }
    reset: null, // { after_bytes, direction: response|request, rate|nth, ...filters }
    truncate: null, // { bytes | fraction, rate|nth, ...filters }
    short_put: null, // { bytes | fraction, rate|nth, ...filters }
    // a store that ignores If-Match on GET and HEAD (the proxy drops it and
    // re-signs): objmount must still never mix two versions in one read
    ignore_if_match: false,
    // requests whose key matches this regular expression are counted one
    // by one in stats.requests.by_key ("GetObject dir/name": n), so a test
    // can tell that a given object was fetched (null: none are)
    count_keys: null,
    // redirects of the upstream (a real AIStore's 307s to its targets) come
    // back through this proxy: the front listener rewrites an absolute
    // Location to another host to /_hop/HOST:PORT/..., which it forwards to
    // HOST:PORT, so every fault reaches the targets too
    hop_redirects: false,
    aistore: {
      etag_non_md5: false, // single-PUT ETags become 40 hex digits
      multipart_etag: 'md5', // 'md5' (as s3rver did) or 'aws' (md5 of part md5s -N)
      drop_content_md5: false, // target forwards Content-MD5 unless set
    },
  };
}

function emptyStats() {
  return {
    requests: {
      total: 0, by_method: {}, by_kind: {}, by_listener: {}, in_flight: 0, peak_in_flight: 0,
      by_key: {}, // see config.count_keys
      hops_by_kind: {}, // of by_kind, requests to a redirect target (hop_redirects)
      delayed_in_flight: 0, // requests the latency fault delayed that have not ended
    },
    faults: { latency: 0, errors: 0, reset: 0, truncate: 0, short_put: 0 },
    faults_by_kind: {},
    redirects: 0,
    hops: 0, // requests forwarded to a redirect target (hop_redirects)
    target_refused: 0,
    gateway_list_pages: 0,
    upstream_errors: 0,
    client_aborts: 0,
    bytes: { from_clients: 0, to_clients: 0 },
    connections: { opened: 0, active: 0 },
  };
}

// small seeded PRNG (mulberry32) for reproducible fault rates
function makeRng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class State {
  constructor(initial) {
    this.config = defaultConfig();
    this.stats = emptyStats();
    this.seen = {}; // matching requests seen per mode (for nth)
    this.rng = makeRng(1);
    this.countKeysRe = null;
    this.etags = new Map(); // "bucket\nkey" -> { real, shown } (AIStore emulation)
    if (initial) this.update(initial, false);
  }

  update(patch, replace) {
    const next = replace ? defaultConfig() : this.config;
    for (const [name, value] of Object.entries(patch || {})) {
      if (name === 'aistore') {
        next.aistore = { ...defaultConfig().aistore, ...(replace ? {} : next.aistore), ...(value || {}) };
      } else if (name === 'seed') {
        next.seed = Number(value) || 0;
      } else if (name === 'ignore_if_match') {
        next.ignore_if_match = Boolean(value);
      } else if (name === 'count_keys') {
        next.count_keys = value ? String(value) : null;
        this.countKeysRe = next.count_keys ? new RegExp(next.count_keys) : null;
      } else if (MODES.includes(name)) {
        next[name] = value && typeof value === 'object' ? compileMode(name, value) : null;
        this.seen[name] = 0;
      } else {
        throw new Error(`unknown config key ${name}`);
      }
    }
    if (replace) this.seen = {};
    if (replace && !('count_keys' in (patch || {}))) this.countKeysRe = null;
    this.config = next;
    if ('seed' in (patch || {}) || replace) this.rng = makeRng(next.seed);
  }

  reset() {
    this.config = defaultConfig();
    this.countKeysRe = null;
    this.stats = emptyStats();
    this.seen = {};
    this.rng = makeRng(1);
    this.etags.clear();
  }

  publicConfig() {
    const out = {};
    for (const [name, value] of Object.entries(this.config)) {
      if (value && value._keyRe !== undefined) {
        const { _keyRe, ...rest } = value; // eslint-disable-line no-unused-vars
        out[name] = rest;
      } else {
        out[name] = value;
      }
    }
    return out;
  }

  count(ctx) {
    const r = this.stats.requests;
    r.total++;
    r.by_method[ctx.method] = (r.by_method[ctx.method] || 0) + 1;
    r.by_kind[ctx.kind] = (r.by_kind[ctx.kind] || 0) + 1;
    if (ctx.hop) r.hops_by_kind[ctx.kind] = (r.hops_by_kind[ctx.kind] || 0) + 1;
    r.by_listener[ctx.listener] = (r.by_listener[ctx.listener] || 0) + 1;
    r.in_flight++;
    if (r.in_flight > r.peak_in_flight) r.peak_in_flight = r.in_flight;
    if (this.countKeysRe && ctx.t && ctx.t.hasKey && this.countKeysRe.test(ctx.t.key)) {
      const k = `${ctx.kind} ${ctx.t.key}`;
      r.by_key[k] = (r.by_key[k] || 0) + 1;
    }
  }

  injected(mode, ctx) {
    this.stats.faults[mode]++;
    const k = `${mode}:${ctx.kind}`;
    this.stats.faults_by_kind[k] = (this.stats.faults_by_kind[k] || 0) + 1;
  }

  // Does fault `mode` fire for this request? (filters, then nth/count or rate)
  fires(mode, ctx) {
    const m = this.config[mode];
    if (!m) return null;
    if (m.listener && ![].concat(m.listener).includes(ctx.listener)) return null;
    if (m.method && ![].concat(m.method).map(s => s.toUpperCase()).includes(ctx.method)) return null;
    if (m.kind && ![].concat(m.kind).includes(ctx.kind)) return null;
    if (m.query && ![].concat(m.query).every(q => ctx.t.query.has(q))) return null;
    if (m._keyRe && !m._keyRe.test(ctx.t.key)) return null;
    const n = (this.seen[mode] = (this.seen[mode] || 0) + 1);
    if (m.nth !== undefined && m.nth !== null) {
      const count = m.count === undefined ? 1 : m.count;
      return n >= m.nth && n < m.nth + count ? m : null;
    }
    if (m.rate !== undefined && m.rate !== null) {
      return this.rng() < m.rate ? m : null;
    }
    return m;
  }
}

function compileMode(name, value) {
  const m = { ...value };
  if (m.key !== undefined && m.key !== null) {
    Object.defineProperty(m, '_keyRe', { value: new RegExp(m.key), enumerable: false });
  } else {
    Object.defineProperty(m, '_keyRe', { value: null, enumerable: false });
  }
  return m;
}

// ---------------------------------------------------------------------------
// requests

function safeDecode(s) {
  try {
    return decodeURIComponent(s);
  } catch (err) {
    return s;
  }
}

// Splits a raw request URL (optionally below a path prefix such as /s3).
// Returns null when the path is not below the prefix.
function parseTarget(rawUrl, prefix) {
  const q = rawUrl.indexOf('?');
  let rawPath = q === -1 ? rawUrl : rawUrl.slice(0, q);
  const rawQuery = q === -1 ? '' : rawUrl.slice(q + 1);
  if (prefix) {
    if (rawPath === prefix) rawPath = '/';
    else if (rawPath.startsWith(prefix + '/')) rawPath = rawPath.slice(prefix.length);
    else return null;
  }
  const segments = rawPath.slice(1).split('/');
  const bucket = safeDecode(segments[0] || '');
  const key = safeDecode(segments.slice(1).join('/'));
  const query = new Map();
  for (const pair of rawQuery.split('&')) {
    if (!pair) continue;
    const idx = pair.indexOf('=');
    query.set(
      safeDecode(idx === -1 ? pair : pair.slice(0, idx)),
      safeDecode(idx === -1 ? '' : pair.slice(idx + 1)),
    );
  }
  return { rawPath, rawQuery, bucket, key, query, hasKey: segments.length > 1 && key !== '' };
}

function classify(method, t, headers) {
  const q = t.query;
  if (!t.bucket) return method === 'GET' ? 'ListBuckets' : 'Other';
  if (!t.hasKey) {
    switch (method) {
      case 'GET':
        if (q.has('uploads')) return 'ListMultipartUploads';
        if (q.get('list-type') === '2') return 'ListObjectsV2';
        for (const sub of ['location', 'acl', 'cors', 'website', 'versioning', 'tagging', 'policy']) {
          if (q.has(sub)) return 'BucketConfig';
        }
        return 'ListObjects';
      case 'HEAD':
        return 'HeadBucket';
      case 'PUT':
        return q.size ? 'BucketConfig' : 'CreateBucket';
      case 'DELETE':
        return q.size ? 'BucketConfig' : 'DeleteBucket';
      case 'POST':
        return q.has('delete') ? 'DeleteObjects' : 'Other';
      default:
        return 'Other';
    }
  }
  switch (method) {
    case 'GET':
      return q.has('uploadId') ? 'ListParts' : 'GetObject';
    case 'HEAD':
      return 'HeadObject';
    case 'PUT':
      if (q.has('uploadId') && q.has('partNumber')) {
        return 'x-amz-copy-source' in headers ? 'UploadPartCopy' : 'UploadPart';
      }
      if ('x-amz-copy-source' in headers) return 'CopyObject';
      return q.size && !q.has('versionId') ? 'ObjectConfig' : 'PutObject';
    case 'POST':
      if (q.has('uploads')) return 'CreateMultipartUpload';
      if (q.has('uploadId')) return 'CompleteMultipartUpload';
      return 'Other';
    case 'DELETE':
      return q.has('uploadId') ? 'AbortMultipartUpload' : 'DeleteObject';
    default:
      return 'Other';
  }
}

function xmlEscape(s) {
  return String(s).replace(/[<>&'"]/g, c => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' }[c]));
}

function xmlUnescape(s) {
  return s.replace(/&(lt|gt|amp|apos|quot|#x?[0-9a-fA-F]+);/g, (m, e) => {
    const named = { lt: '<', gt: '>', amp: '&', apos: "'", quot: '"' }[e];
    if (named) return named;
    return String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
  });
}

function s3ErrorBody(code, message, resource, extra = '') {
  return Buffer.from(
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
      `<Error><Code>${xmlEscape(code)}</Code><Message>${xmlEscape(message)}</Message>` +
      `<Resource>${xmlEscape(resource)}</Resource>${extra}` +
      `<RequestId>${crypto.randomBytes(8).toString('hex').toUpperCase()}</RequestId></Error>`,
  );
}

const ERROR_DEFAULTS = {
  400: ['RequestTimeout', 'Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed.'],
  500: ['InternalError', 'We encountered an internal error. Please try again.'],
  502: ['BadGateway', 'The proxy received an invalid response from the upstream server.'],
  503: ['ServiceUnavailable', 'Reduce your request rate.'],
  504: ['GatewayTimeout', 'The upstream server did not answer in time.'],
};
const CODE_MESSAGES = {
  SlowDown: 'Please reduce your request rate.',
  RequestTimeout: ERROR_DEFAULTS[400][1],
};

// ---------------------------------------------------------------------------
// the proxy

class Proxy {
  constructor(opts) {
    this.opts = opts;
    this.upstream = new URL(opts.upstream);
    this.upstreamHost = this.upstream.host; // host:port
    this.state = new State(opts.config ? JSON.parse(opts.config) : null);
    // Free upstream sockets are dropped after 4 s, before a server's (s3rver's 5 s)
    // keep-alive timeout can close them under a new request.
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, timeout: 4000 });
    this.addresses = {};
  }

  async start() {
    const mk = (name, handler) => {
      const server = http.createServer({ requestTimeout: 0, headersTimeout: 120000, highWaterMark: 256 * 1024 }, handler);
      server.keepAliveTimeout = 60000;
      server.on('connection', socket => {
        this.state.stats.connections.opened++;
        this.state.stats.connections.active++;
        socket.on('close', () => this.state.stats.connections.active--);
      });
      server.on('clientError', (err, socket) => {
        if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
        else socket.destroy();
      });
      return server;
    };
    const servers = {
      front: mk('front', (req, res) => this.handle('front', req, res)),
      gateway: mk('gateway', (req, res) => this.handle('gateway', req, res)),
      target: mk('target', (req, res) => this.handle('target', req, res)),
      control: http.createServer((req, res) => this.control(req, res)),
    };
    // A gateway that will redirect must not invite the body (no 100 Continue):
    // it answers at once and closes, as the body never comes.
    servers.gateway.on('checkContinue', (req, res) => {
      const t = parseTarget(req.url, '/s3');
      if (t && t.hasKey) {
        res.shouldKeepAlive = false;
        res.setHeader('Connection', 'close');
        this.handle('gateway', req, res);
      } else {
        res.writeContinue();
        this.handle('gateway', req, res);
      }
    });
    const specs = { front: this.opts.listen, gateway: this.opts.gateway, target: this.opts.target, control: this.opts.control };
    for (const [name, server] of Object.entries(servers)) {
      const { host, port } = splitHostPort(specs[name]);
      await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, resolve);
      });
      this.addresses[name] = server.address();
    }
    this.servers = servers;
    return this.addresses;
  }

  close() {
    for (const server of Object.values(this.servers || {})) {
      server.close();
      if (server.closeAllConnections) server.closeAllConnections();
    }
    this.agent.destroy();
  }

  // ---- per request -------------------------------------------------------
  async handle(listener, req, res) {
    const state = this.state;
    const prefix = listener === 'front' ? '' : '/s3';
    let hop = null;
    const hm = listener === 'front' ? /^\/_hop\/([^/]+)(\/.*)?$/.exec(req.url) : null;
    if (hm) {
      // a request to a redirect target (hop_redirects): /_hop/HOST:PORT/path
      const auth = decodeURIComponent(hm[1]);
      const i = auth.lastIndexOf(':');
      hop = { hostname: auth.slice(0, i), port: Number(auth.slice(i + 1)), host: auth };
      req.url = hm[2] || '/';
      state.stats.hops++;
    }
    const t = parseTarget(req.url, prefix);
    let redirected = false;
    if (t && listener === 'target') {
      // pid/utm mark a redirected request; they are not part of the S3 call
      redirected = t.query.has('pid') && t.query.has('utm');
      t.query.delete('pid');
      t.query.delete('utm');
    }
    const ctx = {
      redirected,
      listener,
      hop,
      req,
      res,
      method: req.method,
      t,
      kind: t ? classify(req.method, t, req.headers) : 'Other',
      plan: {},
    };
    state.count(ctx);
    const counted = state.stats.requests; // a reset meanwhile starts new counts
    res.on('close', () => {
      counted.in_flight--;
      if (ctx.delayed) counted.delayed_in_flight--;
      if (!res.writableFinished) {
        state.stats.client_aborts++;
        if (ctx.upReq) ctx.upReq.destroy();
        if (ctx.upRes) ctx.upRes.destroy();
      }
    });
    try {
      if (!t) {
        return this.sendError(ctx, 404, 'NoSuchResource', `this endpoint serves ${prefix}/...`);
      }
      const lat = state.fires('latency', ctx);
      if (lat) {
        state.injected('latency', ctx);
        ctx.delayed = true;
        counted.delayed_in_flight++;
        if (lat.per_mib_ms) ctx.plan.perMiB = Number(lat.per_mib_ms);
        if (lat.first_byte_ms) await delay(Number(lat.first_byte_ms));
      }
      const err = state.fires('errors', ctx);
      if (err) {
        state.injected('errors', ctx);
        const status = Number(err.status || 503);
        const code = err.code || (ERROR_DEFAULTS[status] || ERROR_DEFAULTS[500])[0];
        const message = err.message || CODE_MESSAGES[code] || (ERROR_DEFAULTS[status] || ERROR_DEFAULTS[500])[1];
        return this.sendError(ctx, status, code, message);
      }
      const reset = state.fires('reset', ctx);
      if (reset) ctx.plan.reset = reset;
      const trunc = state.fires('truncate', ctx);
      if (trunc) ctx.plan.truncate = trunc;
      if (ctx.kind === 'PutObject' || ctx.kind === 'UploadPart') {
        const sp = state.fires('short_put', ctx);
        if (sp) ctx.plan.shortPut = sp;
      }
      if (listener === 'front') {
        if (state.config.ignore_if_match && req.headers['if-match'] !== undefined &&
            (ctx.method === 'GET' || ctx.method === 'HEAD')) {
          return this.forward(ctx, { resign: true, keepHost: true, dropHeaders: ['if-match'] });
        }
        return this.forward(ctx, { resign: false });
      }
      if (listener === 'gateway') return await this.gateway(ctx);
      return this.target(ctx);
    } catch (e) {
      process.stderr.write(`faultproxy: ${e.stack || e}\n`);
      if (!res.headersSent) this.sendError(ctx, 500, 'InternalError', String(e.message || e));
      else res.destroy();
    }
  }

  sendError(ctx, status, code, message, extraXml) {
    const body = ctx.method === 'HEAD' ? null : s3ErrorBody(code, message, ctx.req.url, extraXml);
    const headers = { 'Content-Type': 'application/xml', 'x-amz-request-id': crypto.randomBytes(8).toString('hex') };
    if (body) headers['Content-Length'] = body.length;
    else headers['Content-Length'] = 0;
    // the request body (if any) is read and dropped so the connection stays usable
    ctx.req.resume();
    this.sendResponse(ctx, status, headers, body);
  }

  // ---- upstream ----------------------------------------------------------
  // Sends the request upstream. opts: resign (re-sign with the test
  // credentials), rawPath/rawQuery (defaults: as received), body (Buffer
  // instead of streaming req), onResponse(upRes) to take over the response.
  forward(ctx, opts) {
    const { req } = ctx;
    const t = ctx.t;
    const rawPath = opts.rawPath !== undefined ? opts.rawPath : t.rawPath;
    const rawQuery = opts.rawQuery !== undefined ? opts.rawQuery : t.rawQuery;
    const headers = {};
    const connectionTokens = String(req.headers.connection || '')
      .toLowerCase()
      .split(',')
      .map(s => s.trim());
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i].toLowerCase();
      if (HOP_BY_HOP.has(name) || connectionTokens.includes(name)) continue;
      const value = req.rawHeaders[i + 1];
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    }
    let bodyLimit = null;
    let declared = req.headers['content-length'] !== undefined ? Number(req.headers['content-length']) : null;
    if (opts.body !== undefined) {
      headers['content-length'] = opts.body.length;
      delete headers['transfer-encoding'];
    }
    const sp = ctx.plan.shortPut;
    if (sp && declared !== null && opts.body === undefined) {
      const keep = sp.bytes !== undefined ? Math.min(Number(sp.bytes), declared) : Math.floor(declared * Number(sp.fraction === undefined ? 0.5 : sp.fraction));
      if (keep < declared) {
        bodyLimit = keep;
        headers['content-length'] = String(keep);
        delete headers['content-md5'];
        delete headers['x-amz-decoded-content-length'];
        delete headers['x-amz-checksum-crc32'];
        delete headers['x-amz-checksum-crc32c'];
        delete headers['x-amz-checksum-sha1'];
        delete headers['x-amz-checksum-sha256'];
        ctx.shortened = { declared, kept: keep };
        this.state.injected('short_put', ctx);
        opts = { ...opts, resign: true, keepHost: true };
      }
    }
    // a streamed body waits for the upstream's 100 Continue (below)
    const hasBody = (declared !== null && declared > 0) || /chunked/i.test(String(req.headers['transfer-encoding'] || ''));
    if (opts.body === undefined && hasBody && !req.complete) headers.expect = '100-continue';
    if (opts.dropHeaders) for (const h of opts.dropHeaders) delete headers[h];
    if (opts.setHeaders) Object.assign(headers, opts.setHeaders);
    if (opts.resign) {
      if (!opts.keepHost) headers.host = ctx.hop ? ctx.hop.host : this.upstreamHost;
      signRequest({
        method: req.method,
        rawPath,
        rawQuery,
        headers,
        accessKey: this.opts.accessKey,
        secretKey: this.opts.secretKey,
        region: this.opts.region,
      });
    }
    const path = rawPath + (rawQuery ? '?' + rawQuery : '');
    const up = ctx.hop || this.upstream;
    const upReq = http.request({
      host: up.hostname,
      port: up.port,
      method: req.method,
      path,
      headers,
      agent: this.agent,
      setHost: false,
    });
    ctx.upReq = upReq;
    let bodyDone = opts.body !== undefined || req.complete;
    upReq.on('error', err => {
      this.state.stats.upstream_errors++;
      if (ctx.resetRequest) return; // we cut it ourselves
      if (ctx.upRes && !ctx.bodyStarted) return; // an early answer stands (below)
      if (!ctx.res.headersSent) {
        req.resume();
        this.sendError(ctx, 502, 'BadGateway', `upstream: ${err.code || err.message}`);
      } else {
        ctx.res.destroy();
      }
    });
    upReq.on('response', upRes => {
      ctx.upRes = upRes;
      if (ctx.expecting && !ctx.bodyStarted) {
        // the upstream answered before asking for the body (AIStore's
        // proxy redirects a PUT without reading it, then closes): the body
        // is not sent, the client's is drained, the answer relayed, and the
        // upstream connection (owed a body) is not used again
        ctx.expecting = false;
        req.resume();
        upRes.once('end', () => upReq.destroy());
        bodyDone = true;
      }
      const go = () => (opts.onResponse ? opts.onResponse(upRes) : this.relay(ctx, upRes));
      // a shortened PUT answers only once the client sent its whole body
      if (bodyLimit !== null && !bodyDone) req.once('end', go);
      else go();
    });
    if (opts.body !== undefined) {
      upReq.end(opts.body);
      req.resume();
      return upReq;
    }
    req.once('end', () => (bodyDone = true));
    if (headers.expect && /100-continue/i.test(String(headers.expect))) {
      // wait for the upstream's 100 Continue (at most a second, as curl)
      // before the body goes out, so that an early answer loses no byte
      ctx.expecting = true;
      const start = () => {
        if (!ctx.expecting) return;
        ctx.expecting = false;
        ctx.bodyStarted = true;
        this.pumpRequest(ctx, upReq, bodyLimit);
      };
      upReq.on('continue', start);
      setTimeout(start, 1000).unref();
      upReq.flushHeaders();
      return upReq;
    }
    ctx.bodyStarted = true;
    this.pumpRequest(ctx, upReq, bodyLimit);
    return upReq;
  }

  // request body -> upstream, with throttling, a byte limit (short_put) or a
  // reset after N bytes (reset with direction "request")
  pumpRequest(ctx, upReq, bodyLimit) {
    const { req } = ctx;
    const reset = ctx.plan.reset && ctx.plan.reset.direction === 'request' ? ctx.plan.reset : null;
    const perMiB = ctx.plan.perMiB;
    const stats = this.state.stats.bytes;
    if (bodyLimit === null && !reset && !perMiB) {
      req.on('data', chunk => (stats.from_clients += chunk.length));
      req.pipe(upReq);
      return;
    }
    const limit = reset ? Number(reset.after_bytes || 0) : bodyLimit;
    pump(req, upReq, {
      throttle: perMiB ? makeThrottle(perMiB) : null,
      limit,
      onBytes: n => (stats.from_clients += n),
      onLimit: part => {
        if (reset) {
          ctx.resetRequest = true;
          this.state.injected('reset', ctx);
          upReq.destroy();
          hardReset(req.socket);
        } else {
          upReq.end(part); // short_put: the rest is read and dropped
        }
      },
      onEnd: () => upReq.end(),
    });
  }

  // upstream response -> client (headers filtered, faults applied)
  relay(ctx, upRes, mutate) {
    const headers = {};
    for (let i = 0; i < upRes.rawHeaders.length; i += 2) {
      const name = upRes.rawHeaders[i];
      const lower = name.toLowerCase();
      if (HOP_BY_HOP.has(lower)) continue;
      if (lower in headers) headers[lower] = [].concat(headers[lower], upRes.rawHeaders[i + 1]);
      else headers[lower] = upRes.rawHeaders[i + 1];
    }
    if (mutate) mutate(headers);
    if (ctx.listener === 'front' && (this.opts.hopRedirects || this.state.config.hop_redirects) &&
        headers.location &&
        upRes.statusCode >= 300 && upRes.statusCode < 400) {
      const m = /^http:\/\/([^/?#]+)(.*)$/i.exec(String(headers.location));
      const front = this.addresses.front;
      if (m && m[1] !== `${front.address}:${front.port}`)
        headers.location = `http://${front.address}:${front.port}/_hop/${m[1]}${m[2] || '/'}`;
    }
    const hasBody = ctx.method !== 'HEAD' && upRes.statusCode !== 204 && upRes.statusCode !== 304;
    // A body-less upstream response must still be consumed, or its socket
    // never returns to the keep-alive pool (and the pool runs dry).
    if (!hasBody) upRes.resume();
    this.sendResponse(ctx, upRes.statusCode, headers, hasBody ? upRes : null);
  }

  // Writes a response; body is a Buffer, a readable stream or null.
  // Applies per-MiB latency, truncation and response resets.
  sendResponse(ctx, status, headers, body) {
    const { res } = ctx;
    const state = this.state;
    if (res.headersSent || res.destroyed) {
      if (body && body.resume) body.resume();
      return;
    }
    const reset = ctx.plan.reset && ctx.plan.reset.direction !== 'request' ? ctx.plan.reset : null;
    const trunc = ctx.plan.truncate && status < 300 ? ctx.plan.truncate : null;
    const perMiB = ctx.plan.perMiB;
    const total = headers['content-length'] !== undefined ? Number(headers['content-length']) : Buffer.isBuffer(body) ? body.length : null;
    let limit = null;
    let onLimit = null;
    if (trunc && body) {
      let keep = null;
      if (trunc.bytes !== undefined) keep = Number(trunc.bytes);
      else if (total !== null) keep = Math.floor(total * Number(trunc.fraction === undefined ? 0.5 : trunc.fraction));
      if (keep !== null && (total === null || keep < total)) {
        limit = keep;
        onLimit = () => {
          state.injected('truncate', ctx);
          // the headers announced more: close so the client sees a short body
          res.socket.end();
          setTimeout(() => res.socket && res.socket.destroy(), 1000);
        };
      }
    }
    if (reset && (limit === null || Number(reset.after_bytes || 0) < limit)) {
      const after = Number(reset.after_bytes || 0);
      if (!body || total === null || after < total) {
        limit = after;
        onLimit = () => {
          state.injected('reset', ctx);
          setTimeout(() => hardReset(res.socket), 20);
        };
      }
    }
    res.writeHead(status, headers);
    if (!body) {
      if (onLimit && limit === 0 && status !== 304) {
        res.flushHeaders();
        onLimit();
      } else {
        res.end();
      }
      return;
    }
    if (Buffer.isBuffer(body)) body = bufferStream(body);
    body.on('error', () => res.destroy());
    if (limit === null && !perMiB) {
      body.on('data', chunk => (state.stats.bytes.to_clients += chunk.length));
      body.pipe(res);
      return;
    }
    if (limit === 0) {
      res.flushHeaders();
      body.destroy();
      onLimit();
      return;
    }
    pump(body, res, {
      throttle: perMiB ? makeThrottle(perMiB) : null,
      limit,
      onBytes: n => (state.stats.bytes.to_clients += n),
      onLimit: part => {
        body.destroy();
        res.write(part, () => onLimit());
      },
      onEnd: () => res.end(),
    });
  }

  // ---- AIStore gateway ---------------------------------------------------
  async gateway(ctx) {
    const { t, req, res } = ctx;
    if (t.hasKey) {
      // every object-level call, multipart included, goes to a target
      const target = this.addresses.target;
      const pid = crypto.randomBytes(6).toString('hex');
      const extra = `pid=${pid}&utm=${Date.now()}`;
      const location = `http://${target.address}:${target.port}/s3${t.rawPath}?${t.rawQuery ? t.rawQuery + '&' : ''}${extra}`;
      this.state.stats.redirects++;
      const body =
        ctx.method === 'HEAD'
          ? null
          : Buffer.from(
              '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>TemporaryRedirect</Code>' +
                '<Message>Please re-send this request to the specified temporary endpoint. ' +
                'Continue to use the original request endpoint for future requests.</Message>' +
                `<Endpoint>${xmlEscape(`${target.address}:${target.port}`)}</Endpoint></Error>`,
            );
      const headers = { Location: location, 'Content-Type': 'application/xml', 'Content-Length': body ? body.length : 0 };
      // The body of a PUT is not read: Node discards it after the answer
      // (keep-alive), or, with Expect: 100-continue, the client never sends
      // it and the connection is closed.
      this.sendResponse(ctx, 307, headers, body);
      return;
    }
    if (ctx.kind === 'ListObjectsV2' && req.method === 'GET') return this.gatewayList(ctx);
    // other bucket-level calls are answered by the gateway itself
    return this.forward(ctx, { resign: true });
  }

  // ListObjectsV2 answered as ONE page with every matching key: the gateway
  // pages through the server and streams what it gets.
  async gatewayList(ctx) {
    const { t } = ctx;
    const pass = ['prefix', 'delimiter', 'start-after', 'encoding-type', 'fetch-owner'];
    const base = [];
    for (const name of pass) {
      if (t.query.has(name)) base.push(`${encodeURIComponent(name)}=${encodeURIComponent(t.query.get(name))}`);
    }
    const urlEncoded = t.query.get('encoding-type') === 'url';
    const out = new (require('stream').PassThrough)();
    const commonPrefixes = [];
    let keyCount = 0;
    let token = null;
    let first = true;
    for (;;) {
      const q = ['list-type=2', 'max-keys=1000']
        .concat(base.filter(p => !(token && p.startsWith('start-after='))))
        .concat(token ? [`continuation-token=${encodeURIComponent(token)}`] : [])
        .join('&');
      const page = await this.fetchUpstream('GET', `/${encodeURIComponent(t.bucket)}`, q);
      this.state.stats.gateway_list_pages++;
      if (page.status !== 200) {
        if (first) {
          const headers = { 'content-type': 'application/xml', 'content-length': page.body.length };
          return this.sendResponse(ctx, page.status, headers, page.body);
        }
        out.destroy(new Error('upstream listing failed'));
        return;
      }
      const xml = page.body.toString('utf8');
      if (first) {
        first = false;
        const cut = xml.search(/<Contents>|<CommonPrefixes>|<\/ListBucketResult>/);
        const head = xml
          .slice(0, cut)
          .replace(/<(IsTruncated|NextContinuationToken|ContinuationToken|KeyCount|MaxKeys)>[^<]*<\/\1>/g, '');
        this.sendResponse(ctx, 200, { 'content-type': 'application/xml' }, out);
        out.write(head + `<MaxKeys>${xmlEscape(t.query.get('max-keys') || '1000')}</MaxKeys><IsTruncated>false</IsTruncated>`);
      }
      const contents = xml.match(/<Contents>[\s\S]*?<\/Contents>/g) || [];
      let chunk = '';
      for (const block of contents) {
        chunk += this.etags.size ? this.rewriteListedEtag(t.bucket, block, urlEncoded) : block;
      }
      keyCount += contents.length;
      for (const block of xml.match(/<CommonPrefixes>[\s\S]*?<\/CommonPrefixes>/g) || []) commonPrefixes.push(block);
      if (chunk && !out.write(chunk)) await new Promise(resolve => out.once('drain', resolve));
      const truncated = /<IsTruncated>true<\/IsTruncated>/.test(xml);
      const next = /<NextContinuationToken>([^<]*)<\/NextContinuationToken>/.exec(xml);
      if (!truncated || !next) break;
      token = xmlUnescape(next[1]);
    }
    keyCount += commonPrefixes.length;
    out.end(commonPrefixes.join('') + `<KeyCount>${keyCount}</KeyCount></ListBucketResult>`);
  }

  get etags() {
    return this.state.etags;
  }

  rewriteListedEtag(bucket, block, urlEncoded) {
    const m = /<Key>([^<]*)<\/Key>/.exec(block);
    if (!m) return block;
    let key = xmlUnescape(m[1]);
    if (urlEncoded) key = safeDecode(key);
    const entry = this.etags.get(`${bucket}\n${key}`);
    if (!entry) return block;
    return block.replace(/<ETag>[^<]*<\/ETag>/, e =>
      e.includes(entry.real) ? `<ETag>&quot;${entry.shown}&quot;</ETag>` : e,
    );
  }

  // A small signed request to the server, answered as { status, headers, body }.
  fetchUpstream(method, rawPath, rawQuery, body) {
    return new Promise((resolve, reject) => {
      const headers = { host: this.upstreamHost };
      if (body) headers['content-length'] = body.length;
      signRequest({ method, rawPath, rawQuery, headers, accessKey: this.opts.accessKey, secretKey: this.opts.secretKey, region: this.opts.region });
      const req = http.request(
        { host: this.upstream.hostname, port: this.upstream.port, method, path: rawPath + (rawQuery ? '?' + rawQuery : ''), headers, agent: this.agent, setHost: false },
        res => {
          const chunks = [];
          res.on('data', c => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  // ---- AIStore target ----------------------------------------------------
  target(ctx) {
    const { t, req } = ctx;
    if (!ctx.redirected) {
      this.state.stats.target_refused++;
      return this.sendError(ctx, 400, 'BadRequest', 'target: request was not redirected by a gateway (pid/utm missing)');
    }
    if (ctx.kind === 'UploadPartCopy') {
      req.resume();
      return this.sendError(ctx, 501, 'NotImplemented', 'UploadPartCopy is not supported');
    }
    const rawQuery = t.rawQuery
      .split('&')
      .filter(p => {
        const name = safeDecode(p.split('=')[0]);
        return name !== 'pid' && name !== 'utm';
      })
      .join('&');
    const ais = this.state.config.aistore;
    const id = `${t.bucket}\n${t.key}`;
    const opts = { resign: true, rawQuery, dropHeaders: ['authorization'] };
    if (ais.drop_content_md5) opts.dropHeaders.push('content-md5');
    // If-Match etc. may carry an ETag the target made up: translate it back
    const entry = this.etags.get(id);
    if (entry) {
      opts.setHeaders = {};
      for (const h of ['if-match', 'if-none-match']) {
        if (req.headers[h] && req.headers[h].includes(entry.shown)) {
          opts.setHeaders[h] = req.headers[h].split(entry.shown).join(entry.real);
        }
      }
    }
    const showEtag = (headers, shown) => {
      headers.etag = `"${shown}"`;
    };
    switch (ctx.kind) {
      case 'PutObject':
        opts.onResponse = upRes =>
          this.relay(ctx, upRes, headers => {
            const real = String(headers.etag || '').replace(/"/g, '');
            if (upRes.statusCode !== 200 || !real) return;
            if (ais.etag_non_md5 && !ctx.shortened) {
              const shown = crypto.createHash('sha1').update(real + '/ais').digest('hex');
              this.etags.set(id, { real, shown });
              showEtag(headers, shown);
            } else {
              this.etags.delete(id);
            }
          });
        return this.forward(ctx, opts);
      case 'GetObject':
      case 'HeadObject':
        opts.onResponse = upRes =>
          this.relay(ctx, upRes, headers => {
            const e = this.etags.get(id);
            if (e && String(headers.etag || '').includes(e.real)) showEtag(headers, e.shown);
          });
        return this.forward(ctx, opts);
      case 'DeleteObject':
        this.etags.delete(id);
        return this.forward(ctx, opts);
      case 'CompleteMultipartUpload':
        if (ais.multipart_etag === 'aws') return this.completeAws(ctx, opts, id);
        this.etags.delete(id);
        return this.forward(ctx, opts);
      default:
        return this.forward(ctx, opts);
    }
  }

  // CompleteMultipartUpload whose ETag is shown as md5(part md5s)-N
  completeAws(ctx, opts, id) {
    const chunks = [];
    ctx.req.on('data', c => chunks.push(c));
    ctx.req.on('end', () => {
      const body = Buffer.concat(chunks);
      const partEtags = [...body.toString('utf8').matchAll(/<ETag>([^<]*)<\/ETag>/g)].map(m =>
        xmlUnescape(m[1]).replace(/"/g, ''),
      );
      const shown =
        crypto
          .createHash('md5')
          .update(Buffer.concat(partEtags.map(e => Buffer.from(e, 'hex'))))
          .digest('hex') + `-${partEtags.length}`;
      this.forward(ctx, {
        ...opts,
        body,
        onResponse: upRes => {
          const out = [];
          upRes.on('data', c => out.push(c));
          upRes.on('end', () => {
            let xml = Buffer.concat(out).toString('utf8');
            const headers = { 'content-type': upRes.headers['content-type'] || 'application/xml' };
            if (upRes.statusCode === 200) {
              const m = /<ETag>([^<]*)<\/ETag>/.exec(xml);
              if (m) {
                const real = xmlUnescape(m[1]).replace(/"/g, '');
                this.etags.set(id, { real, shown });
                xml = xml.replace(m[0], `<ETag>&quot;${shown}&quot;</ETag>`);
              }
            }
            const buf = Buffer.from(xml);
            headers['content-length'] = buf.length;
            this.sendResponse(ctx, upRes.statusCode, headers, buf);
          });
        },
      });
    });
  }

  // ---- control API -------------------------------------------------------
  control(req, res) {
    const chunks = [];
    req.on('data', c => chunks.push(c));
    req.on('end', () => {
      const reply = (status, obj) => {
        const body = Buffer.from(JSON.stringify(obj, null, 1) + '\n');
        res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': body.length });
        res.end(body);
      };
      const url = new URL(req.url, 'http://control');
      try {
        if (url.pathname === '/config' && req.method === 'GET') return reply(200, this.state.publicConfig());
        if (url.pathname === '/config' && (req.method === 'PUT' || req.method === 'POST' || req.method === 'PATCH')) {
          const patch = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
          this.state.update(patch, url.searchParams.get('replace') === '1');
          return reply(200, this.state.publicConfig());
        }
        if (url.pathname === '/stats' && req.method === 'GET') return reply(200, this.state.stats);
        if (url.pathname === '/reset' && req.method === 'POST') {
          if (url.searchParams.get('what') === 'stats') this.state.stats = emptyStats();
          else this.state.reset();
          return reply(200, { ok: true });
        }
        if (url.pathname === '/health') return reply(200, { ok: true, addresses: this.addresses });
        return reply(404, { error: 'unknown endpoint' });
      } catch (e) {
        return reply(400, { error: String(e.message || e) });
      }
    });
  }
}

// ---------------------------------------------------------------------------
// helpers

function delay(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

// returns, per chunk, how long to wait so the stream averages perMiB ms/MiB
function makeThrottle(perMiB) {
  const start = Date.now();
  let bytes = 0;
  return n => {
    bytes += n;
    return Math.max(0, start + (bytes / MiB) * perMiB - Date.now());
  };
}

// src -> dst with backpressure. throttle(n) says how long to hold a chunk so
// the stream keeps its pace (a chunk is written at its due time, so the last
// byte is late by the whole budget). At `limit` bytes onLimit(part) gets the
// last piece and later data is ignored (src keeps flowing unless destroyed).
function pump(src, dst, { throttle, limit = null, onLimit, onBytes, onEnd }) {
  let sent = 0;
  let stopped = false;
  let held = 0;
  let ended = false;
  const maybeEnd = () => {
    if (ended && held === 0 && !stopped) onEnd();
  };
  const writeAndResume = chunk => {
    if (dst.write(chunk)) src.resume();
    else dst.once('drain', () => src.resume());
  };
  src.on('data', chunk => {
    if (stopped) return;
    if (limit !== null && sent + chunk.length >= limit) {
      const part = chunk.subarray(0, limit - sent);
      sent = limit;
      stopped = true;
      onBytes(part.length);
      onLimit(part);
      return;
    }
    sent += chunk.length;
    onBytes(chunk.length);
    const wait = throttle ? throttle(chunk.length) : 0;
    src.pause();
    if (wait > 0) {
      held++;
      setTimeout(() => {
        held--;
        writeAndResume(chunk);
        maybeEnd();
      }, wait);
    } else {
      writeAndResume(chunk);
    }
  });
  src.on('end', () => {
    ended = true;
    maybeEnd();
  });
}

function hardReset(socket) {
  if (!socket || socket.destroyed) return;
  if (typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
  else socket.destroy();
}

function bufferStream(buf) {
  const { Readable } = require('stream');
  return Readable.from(buf.length ? [buf] : []);
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv);
  } catch (e) {
    process.stderr.write(`faultproxy: ${e.message}\n`);
    process.exit(2);
  }
  const proxy = new Proxy(opts);
  const addrs = await proxy.start();
  const info = {
    pid: process.pid,
    upstream: opts.upstream,
    front: addrs.front.port,
    gateway: addrs.gateway.port,
    target: addrs.target.port,
    control: addrs.control.port,
    host: addrs.front.address,
  };
  const line = JSON.stringify(info);
  if (opts.portFile) {
    fs.writeFileSync(opts.portFile + '.tmp', line + '\n');
    fs.renameSync(opts.portFile + '.tmp', opts.portFile);
  }
  process.stdout.write(line + '\n');
  const stop = () => {
    proxy.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (require.main === module) main();

module.exports = { Proxy, parseTarget, classify, State };
