'use strict';
// AWS Signature Version 4 for S3 requests, Node built-ins only.
//
// The canonical request is built the way AWS documents it for S3 (and the
// way the patched s3rver, the earlier test server, verified it): the path is
// decoded and re-encoded per segment (RFC 3986 unreserved characters kept, '/' kept),
// query parameters are decoded, re-encoded and sorted, signed headers are
// host, content-md5 and every x-amz-* header present (AWS and Swift's s3api
// refuse a request with an unsigned x-amz-* header).

const crypto = require('crypto');

function rfc3986(string) {
  return encodeURIComponent(string).replace(
    /[!'()*]/g,
    ch => '%' + ch.charCodeAt(0).toString(16).toUpperCase(),
  );
}

function safeDecode(string) {
  try {
    return decodeURIComponent(string);
  } catch (err) {
    return string;
  }
}

function canonicalPath(rawPath) {
  return rawPath
    .split('/')
    .map(segment => rfc3986(safeDecode(segment)))
    .join('/');
}

function canonicalQuery(rawQuery) {
  if (!rawQuery) return '';
  return rawQuery
    .split('&')
    .filter(Boolean)
    .map(pair => {
      const idx = pair.indexOf('=');
      const name = idx === -1 ? pair : pair.slice(0, idx);
      const value = idx === -1 ? '' : pair.slice(idx + 1);
      return [rfc3986(safeDecode(name)), rfc3986(safeDecode(value))];
    })
    .sort(([n1, v1], [n2, v2]) =>
      n1 < n2 ? -1 : n1 > n2 ? 1 : v1 < v2 ? -1 : v1 > v2 ? 1 : 0,
    )
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
}

function hmac(key, data) {
  return crypto
    .createHmac('sha256', key)
    .update(data, 'utf8')
    .digest();
}

/**
 * Signs a request in place: sets x-amz-date, x-amz-content-sha256 and
 * authorization in `headers` (an object with lowercase names), removing any
 * previous signature. `headers.host` must hold the Host that will be sent.
 * payloadHash defaults to UNSIGNED-PAYLOAD so the body can stream.
 */
function signRequest({
  method,
  rawPath,
  rawQuery,
  headers,
  accessKey,
  secretKey,
  region = 'us-east-1',
  payloadHash = 'UNSIGNED-PAYLOAD',
  date = new Date(),
}) {
  for (const name of Object.keys(headers)) {
    if (
      name === 'authorization' ||
      name === 'x-amz-date' ||
      name === 'x-amz-content-sha256' ||
      name === 'x-amz-security-token'
    ) {
      delete headers[name];
    }
  }
  const amzDate = date.toISOString().replace(/[-:]|\.\d+/g, '');
  const day = amzDate.slice(0, 8);
  headers['x-amz-date'] = amzDate;
  headers['x-amz-content-sha256'] = payloadHash;
  const signed = Object.keys(headers)
    .filter(name => name === 'host' || name === 'content-md5' || name.startsWith('x-amz-'))
    .sort();
  const canonicalHeaders = signed
    .map(name => `${name}:${String(headers[name]).trim().replace(/\s+/g, ' ')}\n`)
    .join('');
  const canonicalRequest = [
    method,
    canonicalPath(rawPath),
    canonicalQuery(rawQuery),
    canonicalHeaders,
    signed.join(';'),
    payloadHash,
  ].join('\n');
  const scope = `${day}/${region}/s3/aws4_request`;
  const stringToSign = [
    'AWS4-HMAC-SHA256',
    amzDate,
    scope,
    crypto
      .createHash('sha256')
      .update(canonicalRequest, 'utf8')
      .digest('hex'),
  ].join('\n');
  let key = hmac('AWS4' + secretKey, day);
  key = hmac(key, region);
  key = hmac(key, 's3');
  key = hmac(key, 'aws4_request');
  const signature = crypto
    .createHmac('sha256', key)
    .update(stringToSign, 'utf8')
    .digest('hex');
  headers.authorization =
    `AWS4-HMAC-SHA256 Credential=${accessKey}/${scope}, ` +
    `SignedHeaders=${signed.join(';')}, Signature=${signature}`;
  return headers;
}

module.exports = { signRequest, canonicalPath, canonicalQuery, rfc3986 };
