// Preloaded into tools/faultproxy/faultproxy.js (node --require) by bench.py,
// only when its start-up probe finds that the proxy stalls on HEAD requests.
//
// The bug it works around: the proxy relays an upstream HEAD response without
// reading it to its end, so the upstream socket never returns to the
// keep-alive pool; after 256 HEADs (the agent's maxSockets) every further
// request waits until s3rver drops an idle socket (~5 s). A client that sends
// one HEAD per file (s3fs on ls -l) then measures the proxy, not itself.
// Draining a HEAD response is always safe: it has no body.
'use strict';
const http = require('http');
const request = http.request;
http.request = function (...args) {
  const req = request.apply(this, args);
  if (req.method === 'HEAD') req.on('response', res => res.resume());
  return req;
};
